// `iobench watch`: attach to running processes (a real primary and its replicas).
#pragma once

#include "config/options.h"

namespace iobench {

// Counts the processes' syscalls and I/O sizes until the end condition; prints the report.
int run_watch_command(const WatchCommand& c);

}  // namespace iobench
