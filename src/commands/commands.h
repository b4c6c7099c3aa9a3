// The small subcommands: `iobench payload` and `iobench doctor`.
#pragma once

#include "config/options.h"

namespace iobench {

int run_payload_command(const PayloadCommand& c);
// Prints one line per host check; exits 0 (a missing feature is information, not an error).
int run_doctor_command();

}  // namespace iobench
