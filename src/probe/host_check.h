// What this host offers a benchmark: perf events, io_uring, tools, MTU, CPU settings. Used by
// `iobench doctor`; every check says what it found or why it is unavailable.
#pragma once

#include <string>
#include <vector>

namespace iobench {

struct HostCheck {
  std::string name;
  bool ok = false;
  std::string detail;
};

std::vector<HostCheck> check_host();

}  // namespace iobench
