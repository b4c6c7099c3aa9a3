#include "server/client_shares.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <set>
#include <vector>

#include "net/socket.h"
#include "util/size.h"

namespace iobench {
namespace {

std::string amount(ClientShares::Resource r, uint64_t n) {
  return r == ClientShares::Resource::kSlots ? fmt::format("{} session(s)", n)
                                             : format_bytes_human(n);
}

}  // namespace

ClientShares::Member ClientShares::join(const std::string& key, int fd) {
  std::lock_guard lock(mu_);
  const uint64_t id = next_id_++;
  entries_.emplace(id, Entry{key, fd, 0, nullptr, 0, {}});
  return Member(this, id);
}

void ClientShares::Member::holds(uint64_t own_bytes, const void* payload, uint64_t payload_bytes) {
  if (!owner_) return;
  std::lock_guard lock(owner_->mu_);
  const auto it = owner_->entries_.find(id_);
  if (it == owner_->entries_.end()) return;
  it->second.own_bytes = own_bytes;
  it->second.payload = payload;
  it->second.payload_bytes = payload_bytes;
}

std::optional<std::string> ClientShares::Member::leave() {
  if (!owner_) return std::nullopt;
  std::lock_guard lock(owner_->mu_);
  std::optional<std::string> cut;
  if (const auto it = owner_->entries_.find(id_); it != owner_->entries_.end()) {
    if (!it->second.cut.empty()) cut = std::move(it->second.cut);
    owner_->entries_.erase(it);
  }
  owner_ = nullptr;
  return cut;
}

uint64_t ClientShares::held_locked(const std::string& key, Resource r) const {
  uint64_t n = 0;
  std::set<const void*> payloads;
  for (const auto& [id, e] : entries_) {
    if (e.key != key || !e.cut.empty()) continue;
    if (r == Resource::kSlots) {
      ++n;
      continue;
    }
    n += e.own_bytes;
    if (e.payload && payloads.insert(e.payload).second) n += e.payload_bytes;
  }
  return n;
}

size_t ClientShares::make_room(const std::string& key, Resource r, uint64_t total) {
  std::lock_guard lock(mu_);
  std::set<std::string> keys{key};
  for (const auto& [id, e] : entries_)
    if (e.cut.empty()) keys.insert(e.key);
  if (keys.size() < 2) return 0;  // alone: the whole server is its share
  const uint64_t share = std::max<uint64_t>(1, total / keys.size());
  size_t cut = 0;
  for (const std::string& other : keys) {
    if (other == key) continue;
    // Newest first: the sessions that came last are the ones past the share.
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
      const uint64_t held = held_locked(other, r);
      if (held <= share) break;
      Entry& e = it->second;
      if (e.key != other || !e.cut.empty()) continue;
      e.cut = fmt::format(
          "over its fair share while another client waited: {} held {} of this server's {} "
          "(share {} among {} clients), and {} waited",
          other, amount(r, held), amount(r, total), amount(r, share), keys.size(), key);
      cut_with_reset(e.fd);
      ++cut;
    }
  }
  return cut;
}

}  // namespace iobench
