#include "adaptive/policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "adaptive/chunk_rule.h"
#include "util/size.h"

namespace iobench {

std::string FixedPolicy::describe() const { return "fixed " + format_size(bytes_); }

std::string BudgetPolicy::describe() const {
  return fmt::format("adaptive: budget {}, {}..{}", format_size(l_.budget), format_size(l_.min),
                     format_size(l_.max));
}

uint64_t BudgetPolicy::size_for(uint32_t live) const {
  const uint64_t share = l_.budget / std::max<uint32_t>(live, 1);
  const uint64_t pow2 = share == 0 ? 0 : std::bit_floor(share);
  return std::clamp(pow2, l_.min, l_.max);
}

std::string WriterPolicy::describe() const {
  return fmt::format("adaptive writer: {}..{}, doubling with the live replicas",
                     format_size(l_.min), format_size(cap()));
}

uint64_t WriterPolicy::next_size(uint32_t live, uint64_t prev) const {
  return replication_chunk_size(live, prev, l_.min, cap());
}

std::unique_ptr<BufferPolicy> make_policy(bool adaptive, bool fanout, const PolicyLimits& limits,
                                          uint64_t fixed_bytes) {
  if (!adaptive) return std::make_unique<FixedPolicy>(fixed_bytes);
  if (fanout) return std::make_unique<WriterPolicy>(limits);
  return std::make_unique<BudgetPolicy>(limits);
}

Status validate_limits(const PolicyLimits& l, uint32_t conns) {
  if (l.min == 0) return fail("--buf-min must be at least 1 byte");
  if (l.min > l.max)
    return fail(fmt::format("--buf-min {} is larger than --buf-max {}", format_size(l.min),
                            format_size(l.max)));
  if (l.budget / conns < l.min)
    return fail(fmt::format(
        "--budget {} is smaller than --buf-min {} x --conns {} = {}: not every connection's "
        "minimum fits",
        format_size(l.budget), format_size(l.min), conns, format_size(l.min * conns)));
  return {};
}

}  // namespace iobench
