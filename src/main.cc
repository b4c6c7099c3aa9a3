// iobench: streams a replication payload between a client and a server and measures both sides.
#include <fmt/format.h>
#include <signal.h>

#include <cstdlib>
#include <variant>

#include "cli/options.h"
#include "client/client.h"
#include "commands/commands.h"
#include "report/compare.h"
#include "server/server.h"
#include "watch/watch_command.h"

int main(int argc, char** argv) {
  // A peer that vanishes must surface as EPIPE on write, not kill the process.
  signal(SIGPIPE, SIG_IGN);
  auto cmd = iobench::parse_command_line(argc, argv);
  if (!cmd) {
    iobench::print_error(cmd.error().message);
    return 2;
  }
  // IOBENCH_CHECK_ARGS set: the arguments parsed and checked as a run would, nothing run (the
  // docs test feeds it every command line the documentation quotes).
  if (const char* check = std::getenv("IOBENCH_CHECK_ARGS"); check != nullptr && *check != '\0') {
    fmt::print("iobench: arguments ok\n");
    return 0;
  }
  return std::visit(
      [](const auto& c) -> int {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, iobench::HelpRequested>) {
          fmt::print("{}", c.text);
          return 0;
        } else if constexpr (std::is_same_v<T, iobench::ServerOptions>) {
          return iobench::run_server_command(c);
        } else if constexpr (std::is_same_v<T, iobench::DoctorCommand>) {
          return iobench::run_doctor_command();
        } else if constexpr (std::is_same_v<T, iobench::PayloadCommand>) {
          return iobench::run_payload_command(c);
        } else if constexpr (std::is_same_v<T, iobench::WatchCommand>) {
          return iobench::run_watch_command(c);
        } else if constexpr (std::is_same_v<T, iobench::LoadCommand>) {
          return iobench::run_load_command(c);
        } else if constexpr (std::is_same_v<T, iobench::CompareCommand>) {
          return iobench::run_compare_command(c);
        } else {
          return iobench::run_client_command(c);
        }
      },
      *cmd);
}
