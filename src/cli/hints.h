// One-line explanations of command-line mistakes CLI11 reports poorly: habits brought from iperf3
// (-c HOST, -l SIZE, -s, -P N, ...), `-v` typed for the version, an option given twice.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

namespace iobench {

// A clearer message for the error `e` raised while `app` (the subcommand that was parsing, or
// the top level) read argv; nullopt when there is nothing better to say than e.what().
std::optional<std::string> explain_parse_error(const CLI::App& app, int argc,
                                               const char* const* argv, const CLI::Error& e);

}  // namespace iobench
