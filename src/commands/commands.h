// The small subcommands: `iobench payload`, `iobench doctor` and `iobench load`.
#pragma once

#include "config/load_options.h"
#include "config/options.h"

namespace iobench {

int run_payload_command(const PayloadCommand& c);
// Prints one line per host check; exits 0 (a missing feature is information, not an error).
int run_doctor_command();
// An open-loop RESP load on a Valkey or Redis server (resp_load.cc).
int run_load_command(const LoadCommand& c);

}  // namespace iobench
