// Fair shares of the server between its clients (issue #88): a client is what client_key names
// (a local peer's UID, else the peer's network block), and while another client waits for a
// slot or for memory, no client holds more than its share (the whole divided among the clients
// holding a session or waiting) of the --max-conns slots or of --memory-budget. A client over
// its share when another waits has its newest sessions cut until it is within it, each with a
// named log line (Valkey's maxmemory-clients evicts the largest client first; nginx's
// limit_conn bounds one key's connections). A client alone may use the whole server.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace iobench {

class ClientShares {
 public:
  enum class Resource { kSlots, kMemory };

  // One authenticated session of a client, from its slot to its handler's end: left before
  // its descriptor closes (a number reused since is never shut down).
  class Member {
   public:
    Member() = default;
    Member(Member&& o) noexcept : owner_(o.owner_), id_(o.id_) { o.owner_ = nullptr; }
    Member& operator=(Member&&) = delete;
    Member(const Member&) = delete;
    ~Member() { leave(); }
    // The memory this session holds: its own buffers, and the payload it streams (`payload`
    // identifies it, so the sessions of one client sharing a payload count it once).
    void holds(uint64_t own_bytes, const void* payload, uint64_t payload_bytes);
    // Leaves the shares; why the session was cut to make room, if it was.
    std::optional<std::string> leave();

   private:
    friend class ClientShares;
    Member(ClientShares* owner, uint64_t id) : owner_(owner), id_(id) {}
    ClientShares* owner_ = nullptr;
    uint64_t id_ = 0;
  };

  // `fd` is the session's socket: a cut shuts it down with a reset.
  Member join(const std::string& key, int fd);
  // Client `key` waits for `r` (of which the server has `total`): every other client holding
  // more than its share is cut, its newest sessions first, down to its share. The number cut.
  size_t make_room(const std::string& key, Resource r, uint64_t total);

 private:
  struct Entry {
    std::string key;
    int fd;
    uint64_t own_bytes = 0;
    const void* payload = nullptr;
    uint64_t payload_bytes = 0;
    std::string cut;  // why it was cut (empty: not cut)
  };
  // What `key`'s uncut sessions hold of `r`, a payload shared among them counted once.
  uint64_t held_locked(const std::string& key, Resource r) const;

  mutable std::mutex mu_;
  std::map<uint64_t, Entry> entries_;  // by join order: the last of a key's is its newest
  uint64_t next_id_ = 1;
};

}  // namespace iobench
