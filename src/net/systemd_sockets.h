// Listening sockets handed over by systemd (socket activation, sd_listen_fds(3)'s protocol):
// LISTEN_PID names this process and LISTEN_FDS counts the sockets from fd 3 on. Read without
// libsystemd: two environment variables and a check of each descriptor.
#pragma once

#include <string>
#include <vector>

#include "net/socket.h"
#include "util/result.h"

namespace iobench {

struct InheritedSocket {
  Fd fd;
  std::string where;  // its local address, HOST:PORT
};

// The sockets in the order the .socket unit lists them; none when LISTEN_PID is unset or names
// another process (a parent's). Each must be a listening TCP socket; at most `max` of them. The
// variables are removed, so a child (a forked server) does not take them for its own.
Result<std::vector<InheritedSocket>> sockets_from_systemd(size_t max);

}  // namespace iobench
