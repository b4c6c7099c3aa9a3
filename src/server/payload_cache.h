// The payloads the server's sessions stream, built at most once each and never one behind
// another's lock: a build runs on its session's thread while other sessions build, map or
// stream theirs; sessions asking for a payload being built wait for that build.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "payload/payload.h"
#include "proto/messages.h"
#include "util/memory_budget.h"
#include "util/result.h"

namespace iobench {

class PayloadCache {
 public:
  using Report = std::function<bool(const proto::Progress&)>;  // false: stop (client gone)

  struct Limits {
    unsigned builds = 0;     // builds at once (0: one per core); more wait for one to end
    double build_s = 0;      // a build running longer is stopped (0: no bound)
    unsigned threads = 0;    // compressing threads per build (0: one per core)
  };

  PayloadCache(MemoryBudget& budget, const Limits& limits) : budget_(budget), limits_(limits) {}
  // The payload for `spec`: one a session streams or the last built, one being built (waited
  // for), or built here. Its bytes, and while it is built the build's working memory
  // (build_working_bytes), are taken from the server's budget; refused when they do not fit.
  // A session waiting reports progress to its client about twice a second (so the client's
  // no-progress timeout never fires while the server works).
  // `client` is who asks (client_key): while clients wait for a place, none is granted one
  // past its share of the places (--max-builds over the clients building or waiting).
  Result<std::shared_ptr<const Payload>> get(const PayloadSpec& spec, const Report& report,
                                             const std::string& client = {});

 private:
  static constexpr std::chrono::milliseconds kReportEvery{500};
  struct Build {
    PayloadSpec spec;
    std::string client;  // who builds it
    std::atomic<uint64_t> done{0}, total{0};
    int64_t start_ns = 0;
    std::atomic<bool> finished{false};
    bool abandoned = false;  // stopped because its own client left: a waiter builds it anew
    Result<std::shared_ptr<const Payload>> result = fail("not built");
  };
  struct Live {
    PayloadSpec spec;
    std::weak_ptr<const Payload> payload;
  };
  enum class Step { kFound, kWait, kBuild, kFull };
  // Under mu_: the payload in memory, the build to wait for, or whether this session may build.
  // Places are granted in arrival order: a session that found none takes a `ticket` (queued_)
  // and builds only when a place is free and its ticket is the first of a client under its
  // share of the places (turn_locked).
  Step look(const PayloadSpec& spec, const std::string& client,
            std::shared_ptr<const Payload>& found, std::shared_ptr<Build>& build,
            uint64_t& ticket);
  struct Ticket {
    uint64_t id;
    std::string client;
  };
  // The ticket whose turn it is: the first queued of a client building fewer than its share.
  uint64_t turn_locked(unsigned places) const;
  void leave_queue(uint64_t ticket);
  size_t queue_length();
  Result<std::shared_ptr<const Payload>> run(Build& b, const Report& report);
  void finish(const std::shared_ptr<Build>& b, Result<std::shared_ptr<const Payload>> result);

  MemoryBudget& budget_;
  const Limits limits_;
  std::mutex mu_;
  std::shared_ptr<const Payload> last_;  // kept for the next run of the same spec
  PayloadSpec last_spec_;
  std::vector<Live> live_;  // every payload a session still streams
  std::vector<std::shared_ptr<Build>> building_;
  std::deque<Ticket> queued_;  // tickets waiting for a build place, first come first
  uint64_t next_ticket_ = 1;
};

}  // namespace iobench
