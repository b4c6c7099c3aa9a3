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

}  // namespace iobench
