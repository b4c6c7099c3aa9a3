#include "payload/resp_generator.h"

#include <fmt/format.h>

namespace iobench {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// A fixed base timestamp keeps the stream deterministic; PEXPIREAT lands far in the future so a
// replayed key is not deleted on arrival (2100-01-01 in ms).
constexpr uint64_t kFutureMs = 4102444800000ULL;

}  // namespace

RespGenerator::RespGenerator(uint64_t seed) {
  uint64_t x = seed;
  for (auto& s : s_) s = splitmix64(x);
}

uint64_t RespGenerator::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

uint64_t RespGenerator::below(uint64_t n) { return next() % n; }

size_t RespGenerator::value_size() {
  // 70% small (8..256 B), 25% medium (256 B..4 KiB), 4.5% large (4..16 KiB), 0.5% huge (16..64
  // KiB).
  uint64_t r = below(1000);
  if (r < 700) return 8 + below(249);
  if (r < 950) return 256 + below(3841);
  if (r < 995) return 4096 + below(12289);
  return 16384 + below(49153);
}

void RespGenerator::bulk(std::string& out, std::string_view s) {
  fmt::format_to(std::back_inserter(out), "${}\r\n", s.size());
  out.append(s);
  out.append("\r\n");
}

void RespGenerator::array_header(std::string& out, size_t n) {
  fmt::format_to(std::back_inserter(out), "*{}\r\n", n);
}

void RespGenerator::key(std::string& out, const char* family, uint64_t space) {
  // Key names like "user:session:000123456": a prefix plus a zero-padded id, 16..40 bytes.
  scratch_.clear();
  fmt::format_to(std::back_inserter(scratch_), "{}:{:012}", family, below(space));
  if (below(4) == 0) fmt::format_to(std::back_inserter(scratch_), ":{:x}", next() & 0xffffffffff);
  bulk(out, scratch_);
}

void RespGenerator::value(std::string& out, size_t n) {
  // Values mix text-like runs (compressible, like JSON or serialized objects) with random bytes
  // (like already-compressed blobs), so zstd sees a realistic ratio rather than all-zero pages.
  static constexpr char kAlphabet[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-:{}\",";
  static constexpr char kWords[][12] = {
      "\"id\":", "\"name\":", "\"ts\":",   "\"value\":", "\"tags\":",  "true,",
      "false,",  "null,",     "\"user\":", "\"score\":", "\"items\":", "\"state\":"};
  scratch_.clear();
  while (scratch_.size() < n) {
    if (below(3) == 0) {
      scratch_.append(kWords[below(std::size(kWords))]);
    } else {
      uint64_t r = next();
      for (int i = 0; i < 8; ++i, r >>= 8)
        scratch_.push_back(kAlphabet[(r & 0xff) % (sizeof(kAlphabet) - 1)]);
    }
  }
  scratch_.resize(n);
  bulk(out, scratch_);
}

// HSET, RPUSH or ZADD (r in 42..77 of command()'s 0..99 draw).
void RespGenerator::collection(std::string& out, uint64_t r) {
  if (r < 57) {  // HSET key f v [f v ...]
    const size_t fields = 1 + below(4);
    array_header(out, 2 + 2 * fields);
    bulk(out, "HSET");
    key(out, "hash", 200000);
    for (size_t i = 0; i < fields; ++i) {
      bulk(out, fmt::format("field{}", below(64)));
      value(out, value_size() / 4 + 1);
    }
  } else if (r < 69) {  // RPUSH key v [v ...]
    const size_t items = 1 + below(3);
    array_header(out, 2 + items);
    bulk(out, "RPUSH");
    key(out, "list", 100000);
    for (size_t i = 0; i < items; ++i) value(out, value_size() / 2 + 1);
  } else if (r < 78) {  // ZADD key score member [score member ...]
    const size_t members = 1 + below(3);
    array_header(out, 2 + 2 * members);
    bulk(out, "ZADD");
    key(out, "zset", 100000);
    for (size_t i = 0; i < members; ++i) {
      bulk(out, fmt::format("{}.{}", below(1000000), below(100)));
      bulk(out, fmt::format("member:{:08}", below(10000000)));
    }
  }
}

// MULTI ... EXEC, as a primary propagates a transaction.
void RespGenerator::transaction(std::string& out) {
  array_header(out, 1);
  bulk(out, "MULTI");
  const size_t n = 2 + below(4);
  for (size_t i = 0; i < n; ++i) {
    array_header(out, 3);
    bulk(out, "INCRBY");
    key(out, "counter", 50000);
    bulk(out, std::to_string(1 + below(100)));
    array_header(out, 3);
    bulk(out, "SET");
    key(out, "str", 1000000);
    value(out, value_size());
  }
  array_header(out, 1);
  bulk(out, "EXEC");
}

void RespGenerator::command(std::string& out) {
  ++commands_;
  if (db_ < 0 || below(2000) == 0) {
    db_ = static_cast<int>(below(16));
    array_header(out, 2);
    bulk(out, "SELECT");
    bulk(out, std::to_string(db_));
    return;
  }
  const uint64_t r = below(100);
  if (r < 30) {  // SET key value
    array_header(out, 3);
    bulk(out, "SET");
    key(out, "str", 1000000);
    value(out, value_size());
  } else if (r < 42) {  // SET key value PX ms
    array_header(out, 5);
    bulk(out, "SET");
    key(out, "str", 1000000);
    value(out, value_size());
    bulk(out, "PX");
    bulk(out, std::to_string(60000 + below(86400000)));
  } else if (r < 78) {
    collection(out, r);
  } else if (r < 88) {  // INCRBY on a counter key, by n
    array_header(out, 3);
    bulk(out, "INCRBY");
    key(out, "counter", 50000);
    bulk(out, std::to_string(static_cast<int64_t>(below(2000)) - 1000));
  } else if (r < 93) {  // DEL key (any family: types never mix under one name)
    static constexpr const char* kFamilies[] = {"str", "hash", "list", "zset", "counter"};
    array_header(out, 2);
    bulk(out, "DEL");
    key(out, kFamilies[below(std::size(kFamilies))], 100000);
  } else if (r < 97) {  // PEXPIREAT key ms
    array_header(out, 3);
    bulk(out, "PEXPIREAT");
    key(out, "str", 1000000);
    bulk(out, std::to_string(kFutureMs + below(86400000)));
  } else {
    transaction(out);
  }
}

void RespGenerator::append(std::string& out, size_t min_bytes) {
  const size_t target = out.size() + min_bytes;
  while (out.size() < target) command(out);
}

}  // namespace iobench
