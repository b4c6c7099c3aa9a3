// Who is at the other end of a connection from this host: the kernel's socket table (sock_diag,
// as `ss -p` reads it) gives the peer socket's owner when that socket is in this network
// namespace. A local user can open connections from 65,536 loopback addresses of 256 /24s, so
// a local peer is counted by its UID, not its address (OpenSSH counts by address only, as it
// never shares a host with its attackers; a benchmark peer often does).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace iobench {

// The UID owning the peer socket of accepted TCP socket `fd`, when that socket is on this host
// (in this network namespace); nullopt for a remote peer or when the kernel will not say.
std::optional<uint32_t> local_peer_uid(int fd);

// What fair shares and the pre-auth gate count a connection as: "uid N (this host)" for a local
// peer, else its network block (network_block: --source-block-v4/-v6).
std::string client_key(int fd, const std::string& peer, int v4_bits, int v6_bits);

}  // namespace iobench
