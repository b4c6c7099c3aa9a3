// BufferPolicy: how big each connection's buffer is, given how many connections are live. The
// one interface a user implements to try another rule (see make_policy).
#pragma once

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

// The checks of --budget/--buf-min/--buf-max against --conns; errors name the numbers.
// min <= max; budget >= min * conns (so every connection's minimum fits the budget).
Status validate_limits(const PolicyLimits& l, uint32_t conns);

}  // namespace iobench
