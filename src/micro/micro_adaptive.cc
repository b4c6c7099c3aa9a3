// What the adaptive mode's decisions cost: the per-call check every I/O call of an adaptive
// connection makes (Member::target, two relaxed atomic loads), and a connection joining and
// leaving (the registry recomputes the policy's size under its mutex and records the event).
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

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
BENCHMARK(BM_AdaptiveJoinLeave)->Arg(0)->Arg(15)->Arg(1023);
