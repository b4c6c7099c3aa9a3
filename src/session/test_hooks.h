// Fault injection for the tests, set by environment variables; off (no wrapper) otherwise.
//  - IOBENCH_TEST_BREAK_CONN=INDEX:BYTES (client): connection INDEX's socket is shut down once
//    BYTES have been written, as if its peer had vanished mid-stream.
//  - IOBENCH_TEST_STALL_CONN=INDEX:BYTES:SECONDS (server): connection INDEX stops reading for
//    SECONDS once BYTES have been read, as a replica that stops draining its socket.
#pragma once

#include <cstdint>
#include <memory>

#include "net/stream.h"

namespace iobench {

// The stream connection `index` of a client's group writes through: `inner`, or a wrapper.
std::unique_ptr<Stream> client_fault(Stream& inner, uint32_t index);
// The stream a server's session for connection `index` reads through: `inner`, or a wrapper.
std::unique_ptr<Stream> server_fault(Stream& inner, uint32_t index);

}  // namespace iobench
