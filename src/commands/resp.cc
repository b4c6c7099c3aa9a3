#include "commands/resp.h"

#include <charconv>

namespace iobench {

void append_resp_command(std::string& out, std::initializer_list<std::string_view> words) {
  out += '*';
  out += std::to_string(words.size());
  out += "\r\n";
  for (std::string_view w : words) {
    out += '$';
    out += std::to_string(w.size());
    out += "\r\n";
    out += w;
    out += "\r\n";
  }
}

namespace {

constexpr int kMaxDepth = 16;

// One reply at `at`: its end, or 0 when incomplete; sets malformed/error.
size_t frame_at(std::string_view buf, size_t at, int depth, RespReply& r, uint64_t max_bytes) {
  if (depth > kMaxDepth) {
    r.malformed = true;
    return 0;
  }
  const size_t eol = buf.find("\r\n", at);
  if (eol == std::string_view::npos) return 0;
  if (eol == at) {
    r.malformed = true;
    return 0;
  }
  const char kind = buf[at];
  const std::string_view line = buf.substr(at + 1, eol - at - 1);
  const size_t next = eol + 2;
  switch (kind) {
    case '-':
    case '!':
      r.error = true;
      return next;
    case '+': case ':': case '_': case ',': case '#': case '(':
      return next;
    case '$': case '=': case '*': case '~': case '>': case '%': {
      long long n = 0;
      const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), n);
      if (ec != std::errc{} || end != line.data() + line.size() || n < -1) {
        r.malformed = true;
        return 0;
      }
      if (n == -1) return next;  // a null bulk string or array
      if (static_cast<uint64_t>(n) > max_bytes) {  // every element is a byte at least
        r.too_large = static_cast<uint64_t>(n);
        return 0;
      }
      if (kind == '$' || kind == '=') {
        const size_t want = next + static_cast<size_t>(n) + 2;
        return buf.size() >= want ? want : 0;
      }
      size_t pos = next;
      const long long items = kind == '%' ? 2 * n : n;
      for (long long i = 0; i < items; ++i) {
        pos = frame_at(buf, pos, depth + 1, r, max_bytes);
        if (pos == 0) return 0;
      }
      return pos;
    }
    default:
      r.malformed = true;
      return 0;
  }
}

}  // namespace

RespReply frame_resp_reply(std::string_view buf, uint64_t max_bytes) {
  RespReply r;
  if (buf.empty()) return r;
  r.length = frame_at(buf, 0, 0, r, max_bytes);
  if (r.malformed || r.too_large) r.length = 0;
  return r;
}

}  // namespace iobench
