// How the engines run beyond their names: the options a user sets once for a run and both sides
// apply, each to its own engine. Described once (describe below): the command line, the HELLO,
// the JSON options block and the validation on both sides walk this list.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "util/fields.h"
#include "util/names.h"
#include "util/size.h"

namespace iobench {

// One I/O call's buffer: what --buf (and a HELLO's buffer sizes) accept.
inline constexpr uint64_t kMinBuf = 64;
inline constexpr uint64_t kMaxBuf = 16 * kMiB;

// How a side moves its bytes.
enum class EngineKind { kBlocking, kEpoll, kUring };
template <>
struct Names<EngineKind> {
  static constexpr std::array table{std::pair{EngineKind::kBlocking, std::string_view{"blocking"}},
                                    std::pair{EngineKind::kEpoll, std::string_view{"epoll"}},
                                    std::pair{EngineKind::kUring, std::string_view{"uring"}}};
};

// How a uring receiver asks for data: multishot with provided buffers where the kernel allows
// (auto), always (multishot), or a batch of single receives.
enum class UringRecv { kAuto, kMultishot, kBatch };
template <>
struct Names<UringRecv> {
  static constexpr std::array table{std::pair{UringRecv::kAuto, std::string_view{"auto"}},
                                    std::pair{UringRecv::kMultishot, std::string_view{"multishot"}},
                                    std::pair{UringRecv::kBatch, std::string_view{"batch"}}};
};

struct EngineTuning {
  bool edge = false;                // epoll: edge-triggered (EPOLLET) instead of level-triggered
  uint32_t reads_per_event = 0;     // epoll, level-triggered: reads per readiness event (0: all)
  uint32_t queue_depth = 8;         // uring: requests in flight per io_uring_enter
  bool zerocopy = false;            // sender: MSG_ZEROCOPY (blocking, epoll) or SEND_ZC (uring)
  bool sqpoll = false;              // uring: a kernel thread polls the submission queue
  bool fixed_buffers = false;       // uring sender: sends from the payload, registered
  UringRecv uring_recv = UringRecv::kAuto;  // uring receiver
  uint32_t notsent_lowat = 0;       // sender: TCP_NOTSENT_LOWAT (0: the kernel's default)
};

template <typename Self, typename Visit>
  requires DescribesAs<Self, EngineTuning>
void describe(Self& t, Visit&& visit) {
  visit(Field{"edge", "--edge", "epoll: edge-triggered (default level-triggered)"}, t.edge);
  visit(Field{"reads_per_event", "--reads-per-event",
              "epoll: at most N reads per readiness event (Valkey: 25); 0 = until EAGAIN", 0,
              1 << 20},
        t.reads_per_event);
  visit(Field{"queue_depth", "--qd", "uring: requests in flight per io_uring_enter (default 8)", 1,
              4096},
        t.queue_depth);
  visit(Field{"zerocopy", "--zerocopy",
              "Sender: MSG_ZEROCOPY (blocking, epoll) or IORING_OP_SEND_ZC (uring); TCP only"},
        t.zerocopy);
  visit(Field{"sqpoll", "--sqpoll",
              "uring: a kernel thread polls the submission queue (IORING_SETUP_SQPOLL)"},
        t.sqpoll);
  visit(Field{"fixed_buffers", "--fixed-buffers",
              "uring sender: send from the payload registered with the ring (TCP only)"},
        t.fixed_buffers);
  visit(Field{.name = "uring_recv",
              .flag = "--uring-recv",
              .help = "uring receiver: auto (multishot with provided buffers where the kernel "
                      "allows, default), multishot or batch"},
        t.uring_recv);
  visit(Field{"notsent_lowat", "--notsent-lowat",
              "Sender: TCP_NOTSENT_LOWAT bytes, the unsent data the socket queues (0: kernel)", 0,
              1 << 30},
        t.notsent_lowat);
}

}  // namespace iobench
