// BufferPolicy: how big each connection's buffer is, given how many connections are live. The
// one interface a user implements to try another rule (see make_policy).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "util/result.h"

namespace iobench {

struct PolicyLimits {
  uint64_t budget = 0;      // total buffer memory of one side, over all live connections
  uint64_t min = uint64_t{4} * 1024;  // never below (a 1-byte buffer is all syscalls)
  uint64_t max = uint64_t{64} * 1024;
};

class BufferPolicy {
 public:
  virtual ~BufferPolicy() = default;
  virtual std::string describe() const = 0;  // "adaptive: budget 256K, 4K..64K"
  // The buffer size each connection should use while `live` connections (>= 1) are open.
  virtual uint64_t size_for(uint32_t live) const = 0;
  // The next size when the live count changes to `live` from a size `prev` (0: none yet): a
  // rule with hysteresis looks at both; the others at the count alone.
  virtual uint64_t next_size(uint32_t live, uint64_t /*prev*/) const { return size_for(live); }
  // Total buffer memory the registry keeps a side within (0: none), and the floor a joining
  // connection always gets.
  virtual uint64_t budget() const { return 0; }
  virtual uint64_t floor() const { return 0; }
};

// The same size whatever the live count: the fixed --buf sizes.
class FixedPolicy final : public BufferPolicy {
 public:
  explicit FixedPolicy(uint64_t bytes) : bytes_(bytes) {}
  std::string describe() const override;
  uint64_t size_for(uint32_t) const override { return bytes_; }

 private:
  uint64_t bytes_;
};

// budget / live, rounded down to a power of two, clamped to [min, max]: one replica syncing gets
// the large buffer, many share the budget. Power-of-two steps keep a connection from resizing
// for every small change of the live count.
class BudgetPolicy final : public BufferPolicy {
 public:
  explicit BudgetPolicy(PolicyLimits l) : l_(l) {}
  std::string describe() const override;
  uint64_t size_for(uint32_t live) const override;
  uint64_t budget() const override { return l_.budget; }
  uint64_t floor() const override { return l_.min; }
  const PolicyLimits& limits() const { return l_; }

 private:
  PolicyLimits l_;
};

// A full TLS record. TLS gains nothing above it (results/conns-loopback: 16K and 64K at parity
// at every N; results/fanout: a writer's 32K chunk at N=2 cost x1.33..x1.37 of 16K's with twice
// the memory), so it is --buf-max's default on TLS, for independent connections and a fan-out
// writer alike: the TLS writer's adaptive chunk is one record at every N.
inline constexpr uint64_t kTlsRecordBytes = uint64_t{16} * 1024;

// The chunk a fan-out writer starts from with one replica (--buf-min's default with --fanout).
// TLS: one full record (16K): a TLS writer pays per record, and for one replica a 16K chunk cost
// what 64K did (results/fanout-fleet). TCP: the maximum: a TCP writer pays per write call, and
// for one replica 16K cost it 1.5x what 64K did there.
inline uint64_t writer_start_chunk(bool tls, uint64_t max) {
  return tls ? std::min(kTlsRecordBytes, max) : max;
}

// One writer and N replicas (--fanout): the writer's chunk holds or grows with the live replicas,
// from `min` (the one-replica chunk) doubling per doubling of N up to `max` and to the budget (the
// chunk is one buffer, shared by every replica); adaptive/chunk_rule.h is the rule itself.
class WriterPolicy final : public BufferPolicy {
 public:
  explicit WriterPolicy(PolicyLimits l) : l_(l) {}
  std::string describe() const override;
  uint64_t size_for(uint32_t live) const override { return next_size(live, 0); }
  uint64_t next_size(uint32_t live, uint64_t prev) const override;
  uint64_t floor() const override { return l_.min; }
  const PolicyLimits& limits() const { return l_; }

 private:
  // The largest chunk: --buf-max, within the budget (one chunk), never below --buf-min.
  uint64_t cap() const { return std::max(l_.min, std::min(l_.max, l_.budget)); }
  PolicyLimits l_;
};

// The adaptive policy of a shape: the writer's for a fan-out run, the shared budget otherwise;
// the fixed size when not adaptive.
std::unique_ptr<BufferPolicy> make_policy(bool adaptive, bool fanout, const PolicyLimits& limits,
                                          uint64_t fixed_bytes);

// The checks of --budget/--buf-min/--buf-max against --conns; errors name the numbers.
// min <= max; budget >= min * conns (so every connection's minimum fits the budget).
Status validate_limits(const PolicyLimits& l, uint32_t conns);

}  // namespace iobench
