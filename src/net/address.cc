#include "net/address.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>

#include "util/size.h"

namespace iobench {

std::string HostPort::str() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

Result<HostPort> parse_host_port(std::string_view text, std::string_view what,
                                 uint16_t default_port, bool allow_zero_port) {
  auto bad = [&](std::string_view why) {
    return fail(fmt::format("invalid {} '{}': {} (expected HOST[:PORT])", what, text, why));
  };
  HostPort hp;
  std::string_view port_text;
  if (text.starts_with('[')) {  // [v6]:port
    size_t close = text.find(']');
    if (close == std::string_view::npos) return bad("missing ']'");
    hp.host = std::string(text.substr(1, close - 1));
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (!rest.starts_with(':')) return bad("junk after ']'");
      port_text = rest.substr(1);
      if (port_text.empty()) return bad("empty port");
    }
  } else {
    // One colon: HOST:PORT. None, or several (a bare IPv6 address): a host, default port.
    size_t colon = text.rfind(':');
    if (colon != std::string_view::npos && text.find(':') == colon) {
      hp.host = std::string(text.substr(0, colon));
      port_text = text.substr(colon + 1);
      if (port_text.empty()) return bad("empty port");
    } else {
      hp.host = std::string(text);
    }
  }
  if (hp.host.empty()) return bad("empty host");
  for (char c : hp.host) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' ||
          c == '_' || c == '%'))
      return bad(fmt::format("bad character '{}' in host", c));
  }
  if (port_text.empty()) {
    hp.port = default_port;
    return hp;
  }
  unsigned port = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc{} || ptr != port_text.data() + port_text.size() || port > 65535)
    return bad(fmt::format("port '{}' is not a number in 0..65535", port_text));
  if (port == 0 && !allow_zero_port) return bad("port 0");
  hp.port = static_cast<uint16_t>(port);
  return hp;
}

Result<std::vector<HostPort>> parse_host_ports(std::string_view text, std::string_view what,
                                               uint16_t default_port, bool allow_any) {
  return parse_comma_list(text, [&](std::string_view item) {
    return parse_host_port(item, what, default_port, allow_any);
  });
}

}  // namespace iobench
