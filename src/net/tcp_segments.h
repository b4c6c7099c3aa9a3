// Segments on the wire: what the kernel sent and received on a TCP socket (TCP_INFO's
// tcpi_segs_out/tcpi_segs_in, retransmissions included) — the cost a write pattern has beyond
// its syscalls when each small write leaves as a segment of its own (TCP_NODELAY) — and how
// many of those it sent again (tcpi_total_retrans): a link that drops, as EC2's can.
#pragma once

#include <cstdint>
#include <optional>

#include "util/fields.h"

namespace iobench {

struct TcpSegments {
  uint64_t out = 0, in = 0;
  uint64_t retransmitted = 0;
};

template <typename Self, typename Visit>
  requires DescribesAs<Self, TcpSegments>
void describe(Self& t, Visit&& visit) {
  visit(Field{.name = "out", .summed = true}, t.out);
  visit(Field{.name = "in", .summed = true}, t.in);
  visit(Field{.name = "retransmitted", .summed = true}, t.retransmitted);
}

// So far on `fd`; zeros where it is not a TCP socket.
TcpSegments tcp_segments(int fd);

// Signs that the peer is still reading what this side wrote: the bytes it acknowledged and the
// segments it sent (window updates among them) so far. Equal twice: nothing moved in between.
struct PeerProgress {
  uint64_t bytes_acked = 0, segs_in = 0;
  bool operator==(const PeerProgress&) const = default;
};
PeerProgress peer_progress(int fd);

// Bytes a TCP socket has moved both ways so far (acknowledged by the peer, and received): a
// session's progress as the kernel counts it, whatever engine or TLS layer moves them; nullopt
// where the socket says nothing (not TCP, or closed).
std::optional<uint64_t> bytes_moved(int fd);

inline TcpSegments operator-(const TcpSegments& a, const TcpSegments& b) {
  return fields_minus(a, b);
}

}  // namespace iobench
