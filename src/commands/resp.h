// RESP, as much as a load generator speaks: requests as arrays of bulk strings, and replies
// framed (how long the first complete one is) without being decoded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace iobench {

// Appends the command (an array of bulk strings) to `out`.
void append_resp_command(std::string& out, std::initializer_list<std::string_view> words);

struct RespReply {
  size_t length = 0;   // bytes of the first complete reply; 0: not all here yet
  bool error = false;  // an error reply (-ERR ...), or one holding one
  bool malformed = false;
  uint64_t too_large = 0;  // a bulk length or element count past `max_bytes` (0: none)
};

// The first reply in `buf`: RESP2 (+ - : $ *) and RESP3's simple kinds (_ , # ( =... not
// aggregates beyond arrays, sets and pushes), nested at most 16 deep. A bulk length or an
// element count above `max_bytes` is `too_large` at its header, before any of it arrives.
RespReply frame_resp_reply(std::string_view buf, uint64_t max_bytes = UINT64_MAX);

}  // namespace iobench
