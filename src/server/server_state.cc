#include "server/server_state.h"

#include <fmt/format.h>

#include <thread>

#include "probe/probe.h"
#include "util/size.h"

namespace iobench {

Result<std::shared_ptr<const Payload>> PayloadCache::get(const PayloadSpec& spec,
                                                         const Report& report) {
  // A plain mutex, polled: GCC 12's TSan does not intercept timed_mutex's clocked lock and
  // reports every unlock of one as an unlock of an unlocked mutex.
  std::unique_lock lock(mu_, std::defer_lock);
  auto next_report = std::chrono::steady_clock::now() + kReportEvery;
  while (!lock.try_lock()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (std::chrono::steady_clock::now() < next_report) continue;
    next_report += kReportEvery;
    if (!report({done_.load(), total_.load(), monotonic_ns() - start_ns_.load()}))
      return fail("the client went away while the payload was built");
  }
  if (payload_ && spec.bytes == spec_.bytes && spec.seed == spec_.seed &&
      spec.zstd_level == spec_.zstd_level && spec.file == spec_.file)
    return payload_;
  payload_.reset();  // freed here unless a session still streams it
  // One build at a time (this lock); the budget's take is atomic beside the sessions' own.
  auto taken = budget_.take(spec.bytes);
  if (!taken)
    return fail(fmt::format(
        "server's memory full: sessions hold {} of its --memory-budget {}, this payload needs {} "
        "(try again when a session ends, or use the seed and size in use)",
        format_bytes_human(budget_.held()), format_bytes_human(budget_.limit()),
        format_bytes_human(spec.bytes)));
  const int64_t start = monotonic_ns();
  start_ns_ = start;
  int64_t last = start;
  BuildOptions build;
  build.progress = [&](uint64_t done, uint64_t total) {
    done_ = done;
    total_ = total;
    const int64_t now = monotonic_ns();
    if (done < total && now - last < kReportEvery.count() * 1'000'000) return true;
    last = now;
    return report({done, total, now - start});
  };
  auto p = load_payload(spec, build);  // a throw gives the bytes back too (the hold's scope)
  done_ = total_ = 0;
  if (!p) return std::unexpected(p.error());
  // The bytes stay taken for as long as the payload lives, in the cache or in a session.
  payload_ = std::shared_ptr<const Payload>(
      new Payload(std::move(*p)),
      [hold = std::make_shared<MemoryBudget::Hold>(std::move(*taken))](const Payload* gone) {
        delete gone;
      });
  spec_ = spec;
  return payload_;
}

Result<std::shared_ptr<GroupSide>> GroupTable::get(const proto::Hello& h, uint64_t fixed_buf,
                                                   bool server_sends, double idle_s) {
  std::lock_guard lock(mu_);
  // Finished groups, and groups whose client went away (threads still in one hold it).
  std::erase_if(groups_, [idle_s](const auto& g) {
    return g.second.side->done() || g.second.side->idle_for(2 * idle_s);
  });
  auto it = groups_.find(h.group_id);
  if (it == groups_.end()) {
    auto side = std::make_shared<GroupSide>(
        make_policy(h.adaptive, h.fanout, {h.budget, h.buf_min, h.buf_max}, fixed_buf),
        server_sends, h.kernel_syscalls, h.conns);
    groups_.emplace(h.group_id, Entry{h, side});
    return side;
  }
  const proto::Hello& first = it->second.hello;
  if (first.conns != h.conns || first.adaptive != h.adaptive || first.fanout != h.fanout ||
      first.budget != h.budget ||
      first.buf_min != h.buf_min || first.buf_max != h.buf_max ||
      first.client_sends != h.client_sends)
    return fail(fmt::format("HELLO of connection {} does not match its group {:016x}", h.conn_index,
                            h.group_id));
  return it->second.side;
}

}  // namespace iobench
