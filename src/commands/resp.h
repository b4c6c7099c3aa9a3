// RESP, as much as a load generator speaks: requests as arrays of bulk strings, and replies
// framed (how long the first complete one is) without being decoded.
#pragma once

#include <cstddef>
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
};

// The first reply in `buf`: RESP2 (+ - : $ *) and RESP3's simple kinds (_ , # ( =... not
// aggregates beyond arrays, sets and pushes), nested at most 16 deep.
RespReply frame_resp_reply(std::string_view buf);

}  // namespace iobench
