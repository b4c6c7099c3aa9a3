// What another party sent, made safe to print on one line of a terminal or a log.
#pragma once

#include <string>
#include <string_view>

namespace iobench {

// `text` with every control byte (newline, carriage return, ESC...) and backslash escaped as
// \n, \r, \xHH, \\, and C1 controls, line separators and bidi overrides as \u{XXXX}: what a
// peer sent can never make a line of its own or reorder one.
std::string escape_for_log(std::string_view text);

// `text` cut to its first `most` bytes (at a UTF-8 boundary) and marked "... (N bytes)" when
// longer: what a peer says is quoted, never its whole message.
std::string clip_peer_text(std::string_view text, size_t most = 256);

}  // namespace iobench
