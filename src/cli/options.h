// The command-line parser: argv into one validated command (config/options.h).
#pragma once

#include <string>
#include <variant>

#include "config/load_options.h"
#include "config/options.h"
#include "config/server_options.h"
#include "util/result.h"

namespace iobench {

struct HelpRequested {
  std::string text;
};

using Command = std::variant<ClientOptions, ServerOptions, PayloadCommand, DoctorCommand,
                             CompareCommand, WatchCommand, LoadCommand, HelpRequested>;

// Parses argv into a command. Every error is one line naming the bad value.
Result<Command> parse_command_line(int argc, const char* const* argv);

}  // namespace iobench
