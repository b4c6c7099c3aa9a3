// The client's runs over sizes and repeats: two-host, or loopback with a private server.
#pragma once

#include "config/options.h"

namespace iobench {

// With o.connect empty: loopback (forks a private server); otherwise two-host client.
int run_client_command(const ClientOptions& o);

}  // namespace iobench
