#include "net/systemd_sockets.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace iobench {

namespace {

constexpr int kFirstFd = 3;  // SD_LISTEN_FDS_START

// A variable's value as a positive number; 0 when unset or not a number.
long env_number(const char* name) {
  const char* v = std::getenv(name);
  long n = 0;
  if (!v) return 0;
  std::string_view text(v);
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  return ec == std::errc() && end == text.data() + text.size() && n > 0 ? n : 0;
}

Status check_listening_tcp(int fd) {
  int value = 0;
  socklen_t len = sizeof value;
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &len) != 0)
    return fail(fmt::format("fd {}: not a socket ({})", fd, std::strerror(errno)));
  if (value == 0) return fail(fmt::format("fd {}: a socket that is not listening", fd));
  sockaddr_storage ss{};
  len = sizeof ss;
  int type = 0;
  socklen_t type_len = sizeof type;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0 ||
      getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) != 0 || type != SOCK_STREAM ||
      (ss.ss_family != AF_INET && ss.ss_family != AF_INET6))
    return fail(fmt::format("fd {}: not a TCP stream socket (ListenStream=PORT in the .socket unit)",
                            fd));
  return {};
}

}  // namespace

Result<std::vector<InheritedSocket>> sockets_from_systemd(size_t max) {
  const long pid = env_number("LISTEN_PID");
  const long count = env_number("LISTEN_FDS");
  const char* count_text = std::getenv("LISTEN_FDS");
  const std::string given = count_text ? count_text : "unset";
  if (pid != getpid()) return std::vector<InheritedSocket>{};
  unsetenv("LISTEN_PID");
  unsetenv("LISTEN_FDS");
  unsetenv("LISTEN_FDNAMES");
  if (count < 1 || static_cast<size_t>(count) > max)
    return fail(fmt::format("invalid LISTEN_FDS '{}' from systemd: expected 1..{} listening "
                            "sockets (the --listen port, then the --tls-listen one)", given, max));
  std::vector<InheritedSocket> out;
  for (int fd = kFirstFd; fd < kFirstFd + count; ++fd) {
    if (auto ok = check_listening_tcp(fd); !ok)
      return fail("systemd's socket " + ok.error().message);
    fcntl(fd, F_SETFD, FD_CLOEXEC);  // systemd passes them inheritable
    out.push_back({Fd(fd), local_address(fd)});
  }
  return out;
}

}  // namespace iobench
