// What another party sent, made safe to print: every byte that could end a line or steer a
// terminal escaped (the server's log of its clients, the client's report of its server).
#include "util/escape.h"

#include <fmt/format.h>

namespace iobench {
namespace {

// The length of the well-formed UTF-8 sequence at `t` (2..4) and its code point, or 0.
size_t utf8_at(std::string_view t, char32_t& cp) {
  const auto b0 = static_cast<unsigned char>(t[0]);
  const size_t n = b0 >= 0xf0 && b0 <= 0xf4 ? 4 : b0 >= 0xe0 ? 3 : b0 >= 0xc2 && b0 < 0xe0 ? 2 : 0;
  if (n == 0 || t.size() < n) return 0;
  cp = b0 & (0x7f >> n);
  for (size_t i = 1; i < n; ++i) {
    const auto b = static_cast<unsigned char>(t[i]);
    if ((b & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3f);
  }
  const char32_t least = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
  if (cp < least || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

// Code points a terminal or log viewer acts on: C1 controls (U+0085 ends a line, U+009B opens
// a control sequence), the line and paragraph separators, and the bidirectional overrides and
// isolates that reorder what a reader sees (CVE-2021-42574's "Trojan Source").
bool acts_on_display(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
         (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200e ||
         cp == 0x200f || cp == 0x061c;
}

}  // namespace

std::string escape_for_log(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const char c = text[at];
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x80) {
      char32_t cp = 0;
      const size_t n = utf8_at(text.substr(at), cp);
      if (n == 0)
        out += fmt::format("\\x{:02x}", b);  // not UTF-8: a raw 0x9b among them
      else if (acts_on_display(cp))
        out += fmt::format("\\u{{{:04x}}}", static_cast<uint32_t>(cp));
      else
        out.append(text.substr(at, n));
      at += n ? n : 1;
      continue;
    }
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (b < 0x20 || b == 0x7f) {  // other controls: ESC sequences above all
      out += fmt::format("\\x{:02x}", b);
    } else {
      out += c;
    }
    ++at;
  }
  return out;
}

std::string clip_peer_text(std::string_view text, size_t most) {
  if (text.size() <= most) return std::string(text);
  size_t cut = most;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return fmt::format("{}... ({} bytes)", text.substr(0, cut), text.size());
}

}  // namespace iobench
