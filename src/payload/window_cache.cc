#include "payload/window_cache.h"

#include <fmt/format.h>

#include "payload/xxh3_fast.h"
#include "util/size.h"

namespace iobench {

Result<std::shared_ptr<const RepeatedWindow>> WindowCache::get(std::span<const std::byte> first,
                                                               uint64_t pass_unit) {
  // The key is the window's content, not its address: a payload loaded where the last one
  // was mapped must not stream the old one's prefix.
  const Key key{xxh3_oneshot(first.data(), first.size()), uint64_t{first.size()}, pass_unit};
  std::lock_guard lock(mu_);
  std::erase_if(windows_, [](const auto& w) { return w.second.expired(); });
  if (auto it = windows_.find(key); it != windows_.end())
    if (auto live = it->second.lock()) return live;
  // Every page of the span is populated: its bytes are what the mapping adds to RSS.
  const uint64_t bytes = RepeatedWindow::span_bytes(first.size(), pass_unit);
  MemoryBudget::Hold hold;
  if (budget_) {
    auto taken = budget_->take(bytes);
    if (!taken && last_) {  // the kept window is the first thing to give up
      last_.reset();
      taken = budget_->take(bytes);
    }
    if (!taken)
      return fail(fmt::format("server's memory full: sessions hold {} of its --memory-budget {}, "
                              "this source window's span needs {} (try again when a session "
                              "ends, or share a window in use)",
                              format_bytes_human(budget_->held()),
                              format_bytes_human(budget_->limit()), format_bytes_human(bytes)));
    hold = std::move(*taken);
  }
  auto mapped = RepeatedWindow::map(first, kAnyLength, pass_unit);
  if (!mapped) return std::unexpected(mapped.error());
  // The bytes are given back as the last session's reference unmaps the span (in the deleter
  // itself: the deleter object lives as long as the cache's weak reference).
  auto held = std::make_shared<MemoryBudget::Hold>(std::move(hold));
  std::shared_ptr<const RepeatedWindow> w(new RepeatedWindow(std::move(*mapped)),
                                          [held](const RepeatedWindow* gone) {
                                            delete gone;
                                            *held = MemoryBudget::Hold{};
                                          });
  windows_[key] = w;
  if (keep_last_) last_ = w;
  return w;
}

size_t WindowCache::mapped() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& w : windows_) n += !w.second.expired();
  return n;
}

WindowCache& client_windows() {
  static WindowCache cache(nullptr, true);
  return cache;
}

}  // namespace iobench
