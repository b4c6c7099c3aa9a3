// What the adaptive mode's decisions cost: the per-call check every I/O call of an adaptive
// connection makes (Member::target, two relaxed atomic loads), and a connection joining and
// leaving (the registry recomputes the policy's size under its mutex and records the event).
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "adaptive/chunk_rule.h"
#include "adaptive/policy.h"
#include "adaptive/registry.h"

namespace {

iobench::PolicyLimits limits() { return {256u << 10, 4u << 10, 64u << 10}; }

void BM_AdaptiveTargetPerCall(benchmark::State& state) {
  const iobench::BudgetPolicy policy(limits());
  iobench::LiveRegistry reg(policy, 0);
  auto member = reg.join(0);
  for (auto _ : state)  // NOLINT(clang-analyzer-deadcode.DeadStores)
    benchmark::DoNotOptimize(member->target());
}

// One decision of each rule, the live count cycling 1..64: the independent connections' budget
// share (BudgetPolicy) and the fan-out writer's chunk (the portable C rule, as a server would
// call it, and through WriterPolicy as iobench does).
void BM_DecisionBudgetShare(benchmark::State& state) {
  const iobench::BudgetPolicy policy(limits());
  uint32_t live = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
    live = live % 64 + 1;
    benchmark::DoNotOptimize(policy.size_for(live));
  }
}

void BM_DecisionWriterChunkRule(benchmark::State& state) {
  unsigned live = 0;
  size_t chunk = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
    live = live % 64 + 1;
    chunk = replication_chunk_size(live, live == 1 ? 0 : chunk, 16u << 10, 64u << 10);
    benchmark::DoNotOptimize(chunk);
  }
}

void BM_DecisionWriterPolicy(benchmark::State& state) {
  const iobench::WriterPolicy policy({256u << 10, 16u << 10, 64u << 10});
  uint32_t live = 0;
  uint64_t chunk = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
    live = live % 64 + 1;
    chunk = policy.next_size(live, live == 1 ? 0 : chunk);
    benchmark::DoNotOptimize(chunk);
  }
}

void BM_AdaptiveJoinLeave(benchmark::State& state) {
  const iobench::BudgetPolicy policy(limits());
  iobench::LiveRegistry reg(policy, 0);
  // Connections already live while one more opens and closes.
  std::vector<std::unique_ptr<iobench::LiveRegistry::Member>> live;
  for (int64_t i = 0; i < state.range(0); ++i) live.push_back(reg.join(static_cast<uint32_t>(i)));
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
    auto m = reg.join(static_cast<uint32_t>(state.range(0)));
    benchmark::DoNotOptimize(m.get());
  }
}

}  // namespace

BENCHMARK(BM_AdaptiveTargetPerCall);
BENCHMARK(BM_DecisionBudgetShare);
BENCHMARK(BM_DecisionWriterChunkRule);
BENCHMARK(BM_DecisionWriterPolicy);
BENCHMARK(BM_AdaptiveJoinLeave)->Arg(0)->Arg(15)->Arg(1023);
