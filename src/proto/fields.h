// Every control message's fields, in wire order, described once. The codec (messages.cc), the
// layout `iobench protocol` prints (which the e2e tests build frames from) and the test that ties
// the layout to kVersion all walk these lists: a field added here is encoded, decoded, printed
// and versioned with no other change.
#pragma once

#include <sched.h>

#include <type_traits>

#include "payload/spec.h"
#include "payload/window.h"
#include "proto/messages.h"
#include "util/fields.h"

namespace iobench::proto {

template <typename Self, typename V>
  requires DescribesAs<Self, Hello>
void describe(Self& h, V&& v) {
  v(Field{"client_sends"}, h.client_sends);
  v(Field{"bytes"}, h.bytes);
  // The bounds here are the command line's (the constants both share): the server checks them.
  v(Field{.name = "send_buf_bytes", .min = kMinBuf, .max = kMaxBuf}, h.send_buf_bytes);
  v(Field{.name = "recv_buf_bytes", .min = kMinBuf, .max = kMaxBuf}, h.recv_buf_bytes);
  v(Field{"socket"}, h.socket);
  v(Field{"decompress"}, h.decompress);
  v(Field{"seed"}, h.seed);
  v(Field{.name = "zstd_level", .min = kMinZstdLevel, .max = kMaxZstdLevel}, h.zstd_level);
  v(Field{"proto"}, h.proto);
  v(Field{"engine"}, h.engine);
  v(Field{"timeout_s"}, h.timeout_s);
  v(Field{"tls_io"}, h.tls_io);
  v(Field{"tls_records"}, h.tls_records);
  v(Field{"kernel_syscalls"}, h.kernel_syscalls);
  v(Field{"tuning"}, h.tuning);
  v(Field{.name = "cpu", .min = -1, .max = CPU_SETSIZE - 1}, h.cpu);
  v(Field{.name = "conns", .min = 1, .max = kMaxConns}, h.conns);
  v(Field{"conn_index"}, h.conn_index);
  v(Field{"group_id"}, h.group_id);
  v(Field{"payload_bytes"}, h.payload_bytes);
  v(Field{"adaptive"}, h.adaptive);
  v(Field{"fanout"}, h.fanout);
  v(Field{.name = "source_window", .min = kMinWindow, .max = kMaxWindow, .zero_is_unset = true},
    h.source_window);
  // 0 unless adaptive.
  v(Field{.name = "budget", .min = kMinBuf, .max = kGiB, .zero_is_unset = true}, h.budget);
  v(Field{.name = "buf_min", .min = kMinBuf, .max = kMaxBuf, .zero_is_unset = true}, h.buf_min);
  v(Field{.name = "buf_max", .min = kMinBuf, .max = kMaxBuf, .zero_is_unset = true}, h.buf_max);
  v(Field{"auth"}, h.auth);
}

template <typename Self, typename V>
  requires DescribesAs<Self, Challenge>
void describe(Self& c, V&& v) {
  v(Field{"nonce"}, c.nonce);
}

template <typename Self, typename V>
  requires DescribesAs<Self, Auth>
void describe(Self& a, V&& v) {
  v(Field{"client_nonce"}, a.client_nonce);
  v(Field{"proof"}, a.proof);
}

template <typename Self, typename V>
  requires DescribesAs<Self, Ack>
void describe(Self& a, V&& v) {
  v(Field{"server_version"}, a.server_version);
}

template <typename Self, typename V>
  requires DescribesAs<Self, ErrorMsg>
void describe(Self& e, V&& v) {
  v(Field{"message"}, e.message);
}

template <typename Self, typename V>
  requires DescribesAs<Self, Progress>
void describe(Self& p, V&& v) {
  v(Field{"done_bytes"}, p.done_bytes);
  v(Field{"total_bytes"}, p.total_bytes);
  v(Field{"elapsed_ns"}, p.elapsed_ns);
}

template <typename Self, typename V>
  requires DescribesAs<Self, Placement>
void describe(Self& p, V&& v) {
  v(Field{"pinned_cpu"}, p.pinned_cpu);
  v(Field{"allowed_cpus"}, p.allowed_cpus);
  v(Field{"seen_cpus"}, p.seen_cpus);
}

template <typename Self, typename V>
  requires DescribesAs<Self, SideResult>
void describe(Self& r, V&& v) {
  v(Field{"is_sender"}, r.is_sender);
  v(Field{"bytes_expected"}, r.bytes_expected);
  v(Field{"buf_bytes"}, r.buf_bytes);
  v(Field{"probe"}, r.probe);
  v(Field{"host_busy"}, r.host_busy);
  v(Field{.name = "io", .flatten = true}, r.io);
  v(Field{"xxh3"}, r.xxh3);
  v(Field{"decoded_bytes"}, r.decoded_bytes);
  v(Field{"decoded"}, r.decoded);
  v(Field{"socket"}, r.socket);
  v(Field{"segments"}, r.segments);
  v(Field{"engine"}, r.engine);
  v(Field{"error"}, r.error);
  v(Field{"stream"}, r.stream);
  v(Field{"tls"}, r.tls);
  v(Field{"syscalls"}, r.syscalls);
  v(Field{.name = "buf_resizes", .summed = true}, r.buf_resizes);
  v(Field{"cpu_scope"}, r.cpu_scope);
  v(Field{"placement"}, r.placement);
}

template <typename Self, typename V>
  requires DescribesAs<Self, LivePoint>
void describe(Self& p, V&& v) {
  v(Field{"t_ns"}, p.t_ns);
  v(Field{"live"}, p.live);
  v(Field{"size"}, p.size);
}

template <typename Self, typename V>
  requires DescribesAs<Self, BufChange>
void describe(Self& c, V&& v) {
  v(Field{"t_ns"}, c.t_ns);
  v(Field{"conn"}, c.conn);
  v(Field{"from"}, c.from);
  v(Field{"to"}, c.to);
  v(Field{"live"}, c.live);
  v(Field{"target"}, c.target);
}

template <typename Self, typename V>
  requires DescribesAs<Self, GroupResult>
void describe(Self& g, V&& v) {
  v(Field{"is_sender"}, g.is_sender);
  v(Field{"conns"}, g.conns);
  v(Field{"conns_failed"}, g.conns_failed);
  v(Field{"probe"}, g.probe);
  v(Field{"host_busy"}, g.host_busy);
  v(Field{"syscalls"}, g.syscalls);
  v(Field{"policy"}, g.policy);
  v(Field{"peak_live"}, g.peak_live);
  v(Field{"peak_buffer_bytes"}, g.peak_buffer_bytes);
  v(Field{"peak_rss_bytes"}, g.peak_rss_bytes);
  v(Field{"timeline"}, g.timeline);
  v(Field{"changes"}, g.changes);
  v(Field{"changes_dropped"}, g.changes_dropped);
  v(Field{"error"}, g.error);
}

// Each message's layout as text, "name:type;" per field, nested blocks in braces: what the
// layout test fingerprints and `iobench protocol` prints.
std::string layout_text();
// FNV-1a of layout_text(): the fingerprint recorded beside kVersion.
uint64_t layout_fingerprint();
// The layout of every message as JSON text: version, and per message type its fields in wire
// order (name, type, default), nested blocks flattened as "block.field".
std::string layout_json();

}  // namespace iobench::proto
