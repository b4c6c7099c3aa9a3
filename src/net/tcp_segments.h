// Segments on the wire: what the kernel sent and received on a TCP socket (TCP_INFO's
// tcpi_segs_out/tcpi_segs_in, retransmissions included) — the cost a write pattern has beyond
// its syscalls when each small write leaves as a segment of its own (TCP_NODELAY).
#pragma once

#include <cstdint>

#include "util/fields.h"

namespace iobench {

struct TcpSegments {
  uint64_t out = 0, in = 0;
};

template <typename Self, typename Visit>
  requires DescribesAs<Self, TcpSegments>
void describe(Self& t, Visit&& visit) {
  visit(Field{.name = "out", .summed = true}, t.out);
  visit(Field{.name = "in", .summed = true}, t.in);
}

// So far on `fd`; zeros where it is not a TCP socket.
TcpSegments tcp_segments(int fd);

inline TcpSegments operator-(const TcpSegments& a, const TcpSegments& b) {
  return {a.out - b.out, a.in - b.in};
}

}  // namespace iobench
