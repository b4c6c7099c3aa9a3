// HOST:PORT parsing for --listen and --connect ("127.0.0.1:5210", "[::1]:5210", "example.com").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace iobench {

struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string str() const;
};

// `what` names the option in errors. A missing port takes `default_port`; port 0 only when
// `allow_zero_port` (listening on an ephemeral port).
Result<HostPort> parse_host_port(std::string_view text, std::string_view what,
                                 uint16_t default_port, bool allow_zero_port);

// "A,B,C": several servers (the replicas of a --fanout run across hosts), each as above.
Result<std::vector<HostPort>> parse_host_ports(std::string_view text, std::string_view what,
                                               uint16_t default_port, bool allow_any);

// The network block a peer ("ADDR:PORT" or "[ADDR6]:PORT", as accept names it) belongs to:
// its first `v4_bits` (IPv4, and IPv4-mapped IPv6) or `v6_bits` (IPv6) bits, as
// "203.0.113.0/24" or "2001:db8::/64" — what the server's pre-auth gate counts connections by,
// so addresses rotated within one block (an IPv6 /64 is one host's) share one share (OpenSSH's
// PerSourceNetBlockSize). A peer that does not parse is its own block.
std::string network_block(std::string_view peer, int v4_bits, int v6_bits);

}  // namespace iobench
