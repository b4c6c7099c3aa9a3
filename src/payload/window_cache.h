// The source windows a process has mapped (--source-window), shared by every session that
// streams the same window bytes with the same write unit, whatever its --bytes: one mapping,
// counted once in a budget when the process has one (the server's --memory-budget), and
// unmapped when the last session streaming it ends.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <tuple>

#include "payload/window.h"
#include "util/memory_budget.h"
#include "util/result.h"

namespace iobench {

class WindowCache {
 public:
  // `budget`: every mapping's bytes are taken from it before it is made (none: not counted).
  // `keep_last`: the last window stays mapped after its sessions end, for the next run of the
  // same one (a client's --repeat); a server keeps none, so its budget holds only what streams.
  WindowCache(MemoryBudget* budget, bool keep_last) : budget_(budget), keep_last_(keep_last) {}

  // The span of `first` over and over for writes of `pass_unit` (RepeatedWindow::map with
  // kAnyLength): the one mapped if a session streams it, else mapped here; refused when its
  // bytes do not fit the budget.
  Result<std::shared_ptr<const RepeatedWindow>> get(std::span<const std::byte> first,
                                                    uint64_t pass_unit);
  // How many windows are mapped now.
  size_t mapped() const;

 private:
  using Key = std::tuple<uint64_t, uint64_t, uint64_t>;  // content hash, size, write unit
  MemoryBudget* budget_;
  bool keep_last_;
  mutable std::mutex mu_;
  std::map<Key, std::weak_ptr<const RepeatedWindow>> windows_;
  std::shared_ptr<const RepeatedWindow> last_;
};

// The client's process-wide cache (no budget; the last window kept).
WindowCache& client_windows();

}  // namespace iobench
