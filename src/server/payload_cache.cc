#include "server/payload_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <thread>

#include "payload/frames.h"
#include "probe/probe.h"
#include "util/size.h"

namespace iobench {
namespace {

bool same_payload(const PayloadSpec& a, const PayloadSpec& b) {
  return a.bytes == b.bytes && a.seed == b.seed && a.zstd_level == b.zstd_level &&
         a.file == b.file;
}

std::string budget_full(const MemoryBudget& budget, uint64_t need, const std::string& what) {
  return fmt::format(
      "server's memory full: sessions hold {} of its --memory-budget {}, this payload needs {}{} "
      "(try again when a session ends, or use the seed and size in use)",
      format_bytes_human(budget.held()), format_bytes_human(budget.limit()),
      format_bytes_human(need), what);
}

}  // namespace

uint64_t PayloadCache::turn_locked(unsigned places) const {
  std::map<std::string_view, unsigned> building;
  for (const auto& b : building_) ++building[b->client];
  std::set<std::string_view> clients;
  for (const auto& [name, n] : building) clients.insert(name);
  for (const Ticket& t : queued_) clients.insert(t.client);
  const auto share = std::max<size_t>(1, places / std::max<size_t>(1, clients.size()));
  for (const Ticket& t : queued_) {
    const auto it = building.find(t.client);
    if (it == building.end() || it->second < share) return t.id;
  }
  return queued_.empty() ? 0 : queued_.front().id;  // every waiter at its share: the first
}

PayloadCache::Step PayloadCache::look(const PayloadSpec& spec, const std::string& client,
                                      std::shared_ptr<const Payload>& found,
                                      std::shared_ptr<Build>& build, uint64_t& ticket) {
  if (last_ && same_payload(spec, last_spec_)) {
    found = last_;
    return Step::kFound;
  }
  std::erase_if(live_, [](const Live& l) { return l.payload.expired(); });
  for (const Live& l : live_) {
    if (!same_payload(spec, l.spec)) continue;
    found = l.payload.lock();
    if (found) return Step::kFound;
  }
  for (const auto& b : building_)
    if (same_payload(spec, b->spec)) {
      build = b;
      return Step::kWait;
    }
  const unsigned most = limits_.builds ? limits_.builds
                                       : std::max(1u, std::thread::hardware_concurrency());
  if (ticket == 0 && (building_.size() >= most || !queued_.empty())) {
    ticket = next_ticket_++;
    queued_.push_back({ticket, client});
  }
  if (building_.size() >= most || (ticket != 0 && turn_locked(most) != ticket))
    return Step::kFull;
  if (ticket != 0) {
    std::erase_if(queued_, [&](const Ticket& t) { return t.id == ticket; });
    ticket = 0;
  }
  // The spare kept for a next run goes before a new payload is taken (freed unless a session
  // streams it), as one spare, not two, is what the budget was sized for.
  last_.reset();
  build = std::make_shared<Build>();
  build->spec = spec;
  build->client = client;
  build->start_ns = monotonic_ns();
  building_.push_back(build);
  return Step::kBuild;
}

size_t PayloadCache::queue_length() {
  std::lock_guard lock(mu_);
  return queued_.size();
}

void PayloadCache::leave_queue(uint64_t ticket) {
  if (ticket == 0) return;
  std::lock_guard lock(mu_);
  std::erase_if(queued_, [&](const Ticket& t) { return t.id == ticket; });
}

Result<std::shared_ptr<const Payload>> PayloadCache::get(const PayloadSpec& spec,
                                                         const Report& report,
                                                         const std::string& client) {
  // Polled, not a condition variable's timed wait: GCC 12's TSan does not intercept the clocked
  // waits, and a waiter reports progress twice a second anyway.
  const int64_t asked_ns = monotonic_ns();
  auto next_report = std::chrono::steady_clock::now() + kReportEvery;
  uint64_t ticket = 0;  // this session's place in the queue for a build place, once it waits
  struct Leave {
    PayloadCache& cache;
    uint64_t& ticket;
    ~Leave() { cache.leave_queue(ticket); }  // however this ends: found, refused, client gone
  } leave{*this, ticket};
  for (;;) {
    std::shared_ptr<const Payload> found;
    std::shared_ptr<Build> build;
    Step step;
    {
      std::lock_guard lock(mu_);
      step = look(spec, client, found, build, ticket);
    }
    if (step == Step::kFound) return found;
    if (step == Step::kBuild) {
      auto result = run(*build, report);
      finish(build, result);
      return result;
    }
    for (;;) {  // a build of this payload to wait for (kWait), or a free place (kFull)
      if (build && build->finished) {
        if (!build->abandoned) return build->result;
        break;  // its client left: look again (this session may build it)
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (std::chrono::steady_clock::now() >= next_report) {
        next_report += kReportEvery;
        const proto::Progress p =
            build ? proto::Progress{build->done.load(), build->total.load(),
                                    monotonic_ns() - build->start_ns}
                  : proto::Progress{0, spec.bytes, monotonic_ns() - asked_ns};
        if (!report(p)) return fail("the client went away while the payload was built");
      }
      if (!build) {
        // The wait for a place is bounded as a build is: a session behind back-to-back builds
        // is told so before its client's own timeouts, not starved (210 s seen). Half as long
        // again as a build's bound (a second at the least): behind one build that runs its
        // whole --max-build-time and the batch it is stopped after, the place still comes.
        const double waited_s = static_cast<double>(monotonic_ns() - asked_ns) / 1e9;
        const double bound_s = limits_.build_s + std::max(1.0, limits_.build_s / 2);
        if (limits_.build_s > 0 && waited_s > bound_s)
          return fail(fmt::format(
              "no payload build place within {} s (--max-build-time {} s and half again, a "
              "second at the least; every place taken, {} session(s) waiting for one, this one "
              "included): try again, or ask for a payload in use",
              bound_s, limits_.build_s, queue_length()));
        break;  // look again for a free place
      }
    }
  }
}

Result<std::shared_ptr<const Payload>> PayloadCache::run(Build& b, const Report& report) {
  const PayloadSpec& spec = b.spec;
  auto taken = budget_.take(spec.bytes);
  if (!taken) return fail(budget_full(budget_, spec.bytes, ""), ErrorKind::kFull);
  std::optional<Payload> payload = load_cached_payload(spec);
  if (!payload) {
    BuildOptions options;
    options.threads = build_threads({limits_.threads, {}});
    // The build's compression contexts and chunks are held only while it runs.
    const uint64_t working = build_working_bytes(spec.zstd_level, options.threads);
    auto work = budget_.take(working);
    if (!work)
      return fail(budget_full(budget_, spec.bytes + working,
                              fmt::format(" with its build's {} of zstd contexts and chunks",
                                          format_bytes_human(working))),
                  ErrorKind::kFull);
    bool too_long = false;
    int64_t last = b.start_ns;
    options.progress = [&](uint64_t done, uint64_t total) {
      b.done = done;
      b.total = total;
      const int64_t now = monotonic_ns();
      if (limits_.build_s > 0 && static_cast<double>(now - b.start_ns) > limits_.build_s * 1e9 &&
          done < total) {
        too_long = true;
        return false;
      }
      if (done < total && now - last < kReportEvery.count() * 1'000'000) return true;
      last = now;
      if (report({done, total, now - b.start_ns})) return true;
      b.abandoned = true;
      return false;
    };
    auto built = load_payload(spec, options);  // a throw gives the bytes back too (the holds)
    if (too_long)
      return fail(fmt::format(
          "the payload's build passed this server's --max-build-time {} s ({} of {} built at zstd "
          "level {}): ask for a lower --zstd-level or a smaller payload",
          limits_.build_s, format_bytes_human(b.done.load()), format_bytes_human(spec.bytes),
          spec.zstd_level));
    if (b.abandoned) return fail("the client went away while the payload was built");
    if (!built) return std::unexpected(built.error());
    payload = std::move(*built);
  }
  // The bytes stay taken for as long as the payload lives, in the cache or in a session, and
  // are given back in the deleter's call: the deleter object itself lives until the control
  // block dies, which waits for the cache's weak reference in live_ (a hold captured by value
  // kept a freed payload's bytes taken until the next session's look).
  auto held = std::make_shared<MemoryBudget::Hold>(std::move(*taken));
  return std::shared_ptr<const Payload>(new Payload(std::move(*payload)),
                                        [held](const Payload* gone) {
                                          delete gone;
                                          *held = MemoryBudget::Hold{};
                                        });
}

void PayloadCache::finish(const std::shared_ptr<Build>& b,
                          Result<std::shared_ptr<const Payload>> result) {
  std::lock_guard lock(mu_);
  std::erase(building_, b);
  if (result) {
    last_ = *result;
    last_spec_ = b->spec;
    live_.push_back({b->spec, *result});
  }
  b->result = std::move(result);
  b->finished = true;  // after the result: a waiter that sees it reads a whole one
}

}  // namespace iobench
