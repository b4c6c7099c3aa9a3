#include "server/server_state.h"

#include <fmt/format.h>

namespace iobench {

Result<std::shared_ptr<GroupSide>> GroupTable::get(const proto::Hello& h, uint64_t fixed_buf,
                                                   bool server_sends, double idle_s) {
  std::lock_guard lock(mu_);
  // Finished groups, groups no session holds any more (every connection refused or gone: before
  // #88 they stayed 2 x idle_s, so a client opening failed groups grew the table, +19 MiB,
  // and every lookup's scan, outside the budget), and groups whose client went away.
  std::erase_if(groups_, [idle_s](const auto& g) {
    return g.second.side.use_count() == 1 || g.second.side->done() ||
           g.second.side->idle_for(2 * idle_s);
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

size_t GroupTable::size() {
  std::lock_guard lock(mu_);
  return groups_.size();
}

}  // namespace iobench
