// `iobench doctor`: what this host offers, one line per check.
#include <fmt/format.h>

#include "commands/commands.h"
#include "probe/host_check.h"
#include "tls/tls.h"

namespace iobench {

int run_doctor_command() {
  auto checks = check_host();
  const tls::KtlsProbe& k = tls::probe_ktls();
  checks.push_back({"kTLS", k.available, k.available ? "tls ULP available" : k.reason});
  checks.push_back({"OpenSSL", true, tls::library_version()});
  for (const auto& c : checks)
    fmt::print("{:<22} {:<12} {}\n", c.name, c.ok ? "ok" : "unavailable", c.detail);
  return 0;
}

}  // namespace iobench
