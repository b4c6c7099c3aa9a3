// `iobench payload`: write a payload to a file, or list and clear the payload cache.
#include <fmt/format.h>
#include <signal.h>

#include <ctime>

#include "commands/commands.h"
#include "net/interrupt.h"
#include "payload/cache.h"
#include "payload/payload.h"
#include "report/output.h"
#include "session/progress.h"
#include "util/size.h"

namespace iobench {
namespace {

std::string local_time(int64_t s) {
  const time_t t = static_cast<time_t>(s);
  tm local{};
  localtime_r(&t, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M", &local);
  return text;
}

int list_payloads(const PayloadSpec& spec) {
  const std::string dir = cache_directory(spec.cache_dir);
  auto entries = list_cache(dir);
  if (!entries) {
    print_error(entries.error().message);
    return 1;
  }
  for (const CacheEntry& e : *entries)
    fmt::print("{:>10}  {}  {}\n", format_bytes_human(e.bytes),
               local_time(e.last_used_ns / 1'000'000'000), e.path);
  fmt::print("{} payload(s), {} in {} (bound {}: --cache-max)\n", entries->size(),
             format_bytes_human(total_bytes(*entries)), dir, format_bytes_human(spec.cache_max));
  return 0;
}

int clear_payloads(const PayloadSpec& spec) {
  const std::string dir = cache_directory(spec.cache_dir);
  auto removed = clear_cache(dir);
  if (!removed) {
    print_error(removed.error().message);
    return 1;
  }
  fmt::print("removed {} payload(s), {}, from {}\n", removed->size(),
             format_bytes_human(total_bytes(*removed)), dir);
  return 0;
}

}  // namespace

int run_payload_command(const PayloadCommand& c) {
  if (c.list) return list_payloads(c.payload);
  if (c.clear) return clear_payloads(c.payload);
  interrupt::install({SIGINT, SIGTERM});
  auto out = OutputFile::open(c.out, "--out");
  if (!out) {
    print_error(out.error().message);
    return 2;
  }
  auto p = load_payload_shown(c.payload, c.quiet);
  if (!p) {
    print_error(p.error().message);
    return interrupt::exit_code(1);
  }
  const auto bytes = p->bytes();
  if (auto st = out->write({reinterpret_cast<const char*>(bytes.data()), bytes.size()}); !st) {
    print_error(st.error().message);
    return 1;
  }
  fmt::print("wrote {} bytes ({}; decodes to {} bytes, xxh3 {:016x}) to {}\n", bytes.size(),
             p->source, p->decoded_bytes, p->xxh3, c.out);
  return 0;
}

}  // namespace iobench
