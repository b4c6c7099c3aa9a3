// One side of a --conns run (or --buf adaptive): the live registry every connection joins, and
// the side's figures from the first connection's data phase to the last one's end — process CPU,
// kernel syscall counts, peak buffer memory and RSS. Shared by client and server.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "adaptive/policy.h"
#include "adaptive/registry.h"
#include "probe/host_busy.h"
#include "probe/probe.h"
#include "probe/syscall_counter.h"
#include "proto/messages.h"

namespace iobench {

class GroupSide {
 public:
  GroupSide(std::unique_ptr<BufferPolicy> policy, bool is_sender, bool kernel_syscalls,
            uint32_t conns);
  GroupSide(const GroupSide&) = delete;
  GroupSide& operator=(const GroupSide&) = delete;

  // A connection starts its data phase: the first one starts the measurement. The member
  // leaves the live count when destroyed.
  std::unique_ptr<LiveRegistry::Member> join(uint32_t conn);
  // A connection is over (its data phase and result exchange), ok or not. After all `conns`,
  // the measurement stops and result() is final.
  void end(bool ok);
  // Waits until every connection has ended, or until `idle_s` pass with no connection starting
  // or ending, or `idle_s` after the first started while some have not: a client cannot hold
  // its first connections' slots for (conns - 1) x idle_s by starting the rest one at a time.
  // Then stops (saying who is missing) and returns the result.
  proto::GroupResult wait(double idle_s);
  bool done() const;
  // Not done, and no connection started or ended for `s` seconds: abandoned by its client.
  bool idle_for(double s) const;

 private:
  void finish_locked(const std::string& error);
  std::unique_ptr<BufferPolicy> policy_;
  LiveRegistry registry_;
  const bool kernel_syscalls_;
  const uint32_t conns_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint32_t joined_ = 0, ended_ = 0, failed_ = 0;
  uint32_t registered_ = 0;  // in the live registry (the test hold counts these)
  int64_t last_activity_ns_;
  int64_t first_join_ns_ = 0;  // 0: none joined yet
  bool started_ = false, done_ = false;
  bool rss_reset_ = false;
  ProbeSample start_;
  HostIdleSample host_start_;
  CounterLease lease_;
  proto::GroupResult result_;
};


}  // namespace iobench
