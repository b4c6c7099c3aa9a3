// Fault injection for the tests, set by environment variables; off (no wrapper) otherwise.
//  - IOBENCH_TEST_BREAK_CONN=INDEX:BYTES (client): connection INDEX's socket is shut down once
//    BYTES have been written, as if its peer had vanished mid-stream.
//  - IOBENCH_TEST_STALL_CONN=INDEX:BYTES:SECONDS (server): connection INDEX stops reading for
//    SECONDS once BYTES have been read, as a replica that stops draining its socket.
//  - IOBENCH_TEST_SLOW_END=SECONDS (server): every session lingers SECONDS after its last
//    message before it closes and ends, as a handler thread descheduled on a loaded host.
//  - IOBENCH_TEST_SLOW_HANDSHAKE=SECONDS (client): the client waits SECONDS before each step of
//    its pre-auth phase (the TLS handshake, the HELLO), as a replica far away (this host has no
//    delay qdisc to put it there).
#pragma once

#include <cstdint>
#include <memory>

#include "net/stream.h"

namespace iobench {

// The stream connection `index` of a client's group writes through: `inner`, or a wrapper.
std::unique_ptr<Stream> client_fault(Stream& inner, uint32_t index);
// The stream a server's session for connection `index` reads through: `inner`, or a wrapper.
std::unique_ptr<Stream> server_fault(Stream& inner, uint32_t index);
// Sleeps IOBENCH_TEST_SLOW_END seconds when it is set (a server session's end).
void server_slow_end();
// Sleeps IOBENCH_TEST_SLOW_HANDSHAKE seconds when it is set (before a client's pre-auth step).
void client_slow_handshake_step();

}  // namespace iobench
