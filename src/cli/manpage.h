// The manual page (iobench.1), written from the same option declarations --help prints, so the
// two cannot disagree; and the groups both list the client's options in.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace iobench {

// Puts each of the client's options in its --help group (sizes, transport, engines, ...).
void group_client_options(CLI::App& app);

// roff for man(1): every option of `app` and of its visible subcommands, by group.
std::string render_manpage(const CLI::App& app, const std::string& version);

}  // namespace iobench
