#include "net/address.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
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

namespace {

// Keeps the first `bits` of `addr` (network byte order), zeroing the rest.
void mask_bits(unsigned char* addr, size_t len, int bits) {
  for (size_t i = 0; i < len; ++i) {
    const int keep = std::clamp(bits - static_cast<int>(8 * i), 0, 8);
    addr[i] &= static_cast<unsigned char>(keep == 0 ? 0 : 0xff << (8 - keep));
  }
}

}  // namespace

std::string network_block(std::string_view peer, int v4_bits, int v6_bits) {
  std::string host(peer);
  if (!host.empty() && host.front() == '[') {
    host = host.substr(1, host.find(']') == std::string::npos ? 0 : host.find(']') - 1);
  } else if (const size_t colon = host.rfind(':'); colon != std::string::npos) {
    host.resize(colon);
  }
  in_addr v4{};
  in6_addr v6{};
  const bool is_v4 = inet_pton(AF_INET, host.c_str(), &v4) == 1;
  if (!is_v4 && inet_pton(AF_INET6, host.c_str(), &v6) != 1) return std::string(peer);
  const bool mapped = !is_v4 && IN6_IS_ADDR_V4MAPPED(&v6);  // IPv4 on a dual-stack socket
  if (mapped) std::memcpy(&v4, &v6.s6_addr[12], sizeof v4);
  char text[INET6_ADDRSTRLEN] = {};
  if (is_v4 || mapped) {
    mask_bits(reinterpret_cast<unsigned char*>(&v4), sizeof v4, v4_bits);
    inet_ntop(AF_INET, &v4, text, sizeof text);
    return fmt::format("{}/{}", text, v4_bits);
  }
  mask_bits(v6.s6_addr, sizeof v6.s6_addr, v6_bits);
  inet_ntop(AF_INET6, &v6, text, sizeof text);
  return fmt::format("{}/{}", text, v6_bits);
}

}  // namespace iobench
