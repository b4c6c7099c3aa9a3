#include "net/interrupt.h"

#include <signal.h>
#include <sys/socket.h>

#include <array>
#include <atomic>

namespace iobench::interrupt {
namespace {

constexpr int kSlots = 4096;
// fd + 1 per slot; 0 (static zero-initialization) is a free slot.
std::array<std::atomic<int>, kSlots> slots;
std::atomic<int> first_signal{0};

void on_signal(int sig) {
  int none = 0;
  first_signal.compare_exchange_strong(none, sig);
  for (auto& s : slots) {
    const int v = s.load(std::memory_order_acquire);
    if (v > 0) ::shutdown(v - 1, SHUT_RDWR);
  }
}

}  // namespace

void install(std::initializer_list<int> signals) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked accept() or connect() returns EINTR
  for (int sig : signals) sigaction(sig, &sa, nullptr);
}

int received() { return first_signal.load(); }

int exit_code(int otherwise, int sig) { return sig ? 128 + sig : otherwise; }

const char* name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "a signal";
  }
}

Registration::Registration(int fd) {
  if (fd < 0) return;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (slots[i].compare_exchange_strong(expected, fd + 1, std::memory_order_acq_rel)) {
      slot_ = i;
      // A signal that came before the registration still ends this socket.
      if (received()) ::shutdown(fd, SHUT_RDWR);
      return;
    }
  }
}

Registration::~Registration() {
  if (slot_ >= 0) slots[slot_].store(0, std::memory_order_release);
}

}  // namespace iobench::interrupt
