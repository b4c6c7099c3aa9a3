// Where a TLS side's CPU goes beyond the crypto it cannot avoid: the cipher's own cost on records
// of the size the side moved (timed on this host), and the rest spread over the records and the
// syscalls per record.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/report.h"

namespace iobench {
namespace {

struct TlsSideCost {
  uint64_t record_bytes = 0;
  double cpu_s_per_gib = 0, crypto_s_per_gib = 0, rest_s_per_gib = 0;
  double records_per_gib = 0, rest_us_per_record = 0, syscalls_per_record = 0;
};

const tls::CryptoCost* crypto_for(const Report& r, uint64_t record) {
  for (const tls::CryptoCost& c : r.crypto)
    if (c.record_bytes == record) return &c;
  return nullptr;
}

// bytes / records of a side's summary, 64..16384; 0 without records.
uint64_t record_bytes_of(const SideSummary& s) {
  if (s.runs == 0 || s.records.median <= 0 || s.bytes.median <= 0) return 0;
  const auto bytes = static_cast<uint64_t>(std::llround(s.bytes.median / s.records.median));
  return std::clamp<uint64_t>(bytes, 64, 16384);
}

std::optional<TlsSideCost> side_cost(const Report& r, const SizeResults& size, bool sender) {
  const SideSummary s = summarize(size, sender);
  const uint64_t record = record_bytes_of(s);
  const tls::CryptoCost* crypto = crypto_for(r, record);
  if (!crypto) return {};
  TlsSideCost c;
  c.record_bytes = record;
  c.cpu_s_per_gib = s.cpu_s_per_gib.median;
  c.crypto_s_per_gib = sender ? crypto->encrypt_s_per_gib : crypto->decrypt_s_per_gib;
  c.rest_s_per_gib = c.cpu_s_per_gib - c.crypto_s_per_gib;
  c.records_per_gib = s.records.median / (s.bytes.median / static_cast<double>(kGiB));
  c.rest_us_per_record = c.rest_s_per_gib / c.records_per_gib * 1e6;
  c.syscalls_per_record = s.syscalls.median / s.records.median;
  return c;
}

}  // namespace

uint64_t record_bytes(const SizeResults& size, bool sender) {
  return record_bytes_of(summarize(size, sender));
}

std::string tls_cost_lines(const Report& r) {
  if (r.crypto.empty()) return {};
  std::string out = fmt::format(
      "tls cost per GiB: crypto = {} sealing (sender) or opening (receiver) records of the size "
      "moved, timed on {}; the rest is record handling and syscalls\n",
      r.crypto.front().cipher, r.mode == RunMode::kLoopback ? "this host" : "the client's host");
  for (const SizeResults& size : r.sizes) {
    for (bool sender : {true, false}) {
      const auto c = side_cost(r, size, sender);
      if (!c) continue;
      std::string hint;
      if (!sender && c->syscalls_per_record >= 1.8)
        hint = " (a header read and a body read per record: --tls-read-ahead or --tls-io bio "
               "read several records at once)";
      out += fmt::format(
          "{:>6} {:<8} {:.3f} s/GiB: crypto {:.3f} ({} B records), the rest {:.3f}: {:.1f} us "
          "per record, {:.2f} {} syscalls per record{}\n",
          buf_label(size.buf), sender ? "sender" : "receiver", c->cpu_s_per_gib,
          c->crypto_s_per_gib, c->record_bytes, c->rest_s_per_gib, c->rest_us_per_record,
          c->syscalls_per_record, sender ? "write" : "read", hint);
    }
  }
  return out;
}

nlohmann::json tls_cost_json(const Report& r, const SizeResults& size) {
  nlohmann::json out = nlohmann::json::object();
  for (bool sender : {true, false}) {
    const auto c = side_cost(r, size, sender);
    if (!c) continue;
    out[sender ? "sender" : "receiver"] = {{"record_bytes", c->record_bytes},
                                           {"cpu_s_per_gib", c->cpu_s_per_gib},
                                           {"crypto_s_per_gib", c->crypto_s_per_gib},
                                           {"rest_s_per_gib", c->rest_s_per_gib},
                                           {"records_per_gib", c->records_per_gib},
                                           {"rest_us_per_record", c->rest_us_per_record},
                                           {"syscalls_per_record", c->syscalls_per_record}};
  }
  return out;
}

}  // namespace iobench
