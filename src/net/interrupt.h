// Signals that end work early (Ctrl-C on a client, SIGTERM on a server). The handler records
// the signal and shuts down every registered socket — async-signal-safe — so a thread blocked in
// any engine (read, epoll_wait, io_uring_enter) returns at once and the figures measured so far
// can still be reported.
#pragma once

#include <initializer_list>

namespace iobench::interrupt {

// Installs the handler for these signals (without SA_RESTART).
void install(std::initializer_list<int> signals);
// The first signal received since install(), or 0.
int received();
// A command's exit status: 128 + `sig` when a signal was received (the shell's convention for a
// process a signal ended), else `otherwise`.
int exit_code(int otherwise, int sig = received());
const char* name(int sig);  // "SIGINT"

// Registers a socket for shutdown on a signal, for as long as it lives: destroy it before the
// descriptor is closed. Beyond the table's capacity (4096) a socket is simply not registered.
class Registration {
 public:
  explicit Registration(int fd);
  Registration(Registration&& o) noexcept : slot_(o.slot_) { o.slot_ = -1; }
  Registration& operator=(Registration&&) = delete;
  Registration(const Registration&) = delete;
  ~Registration();

 private:
  int slot_ = -1;
};

}  // namespace iobench::interrupt
