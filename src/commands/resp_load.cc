// `iobench load`: an open-loop RESP load (wrk2's and HdrHistogram's rule). Request k is due at
// t0 + k / rate on connection k mod conns and is sent then, whatever earlier replies did; its
// latency runs from that intended time to the read that completed its reply. A server stalled
// for 200 ms therefore shows 200 ms in every request due meanwhile, where a closed-loop load
// (valkey-benchmark --rps) delays the sends and counts one slow request a connection
// (coordinated omission). Latencies go into log-linear histograms, one a slice of intended
// time, each stamped with its wall-clock start, so any window (a sync's, read from the
// primary's log) is cut afterwards exactly.
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <deque>
#include <nlohmann/json.hpp>
#include <vector>

#include "commands/commands.h"
#include "commands/resp.h"
#include "net/address.h"
#include "net/interrupt.h"
#include "net/socket.h"
#include "probe/probe.h"
#include "report/output.h"
#include "report/report.h"
#include "util/histogram.h"
#include "util/histogram_json.h"

namespace iobench {
namespace {

constexpr int64_t kLateNs = 1'000'000;  // a send this far past its intended time is late

struct Conn {
  Fd fd;
  std::string out;  // requests not yet written
  std::string in;   // reply bytes not yet framed
  struct Pending {
    int64_t due;     // its intended send time (ns)
    int64_t queued;  // when it was handed to this connection's buffer, to be sent at once
  };
  std::deque<Pending> intended;  // each request awaiting its reply
  bool watching_out = false;
};

int64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

class LoadRun {
 public:
  explicit LoadRun(const LoadCommand& c) : c_(c) {}
  Status connect();
  Status run();
  nlohmann::json json() const;
  void print_summary() const;

 private:
  void schedule(int64_t now);
  Status flush(size_t i);
  Status read_replies(size_t i, int64_t now);
  void want_out(size_t i, bool on);
  std::string request();
  // Requests still awaiting their reply, over every connection.
  uint64_t unanswered() const {
    uint64_t n = 0;
    for (const Conn& conn : conns_) n += conn.intended.size();
    return n;
  }

  const LoadCommand& c_;
  Fd ep_;
  std::vector<Conn> conns_;
  int64_t t0_ = 0, wall0_ = 0, slice_ns_ = 0;
  uint64_t total_ = 0, next_ = 0, answered_ = 0, errors_ = 0, late_ = 0;
  uint64_t key_state_ = 0x9e3779b97f4a7c15ULL;
  LogLinearHistogram all_;        // from each request's intended send time: the figure
  LogLinearHistogram from_send_;  // from when it was sent: what a closed-loop tool reports
  LogLinearHistogram lag_;        // the generator's own lateness, send minus intended
  std::vector<LogLinearHistogram> slices_;
};

Status LoadRun::connect() {
  auto where = parse_host_port(c_.connect, "--connect", 6379, false);
  if (!where) return std::unexpected(where.error());
  ep_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!ep_) return fail(fmt::format("epoll_create1: {}", std::strerror(errno)));
  for (uint32_t i = 0; i < c_.conns; ++i) {
    auto fd = connect_to(*where, 5, SocketOptions{});
    if (!fd) return fail(fmt::format("--connect {}: {}", c_.connect, fd.error().message));
    Conn conn;
    conn.fd = std::move(*fd);
    epoll_event ev{EPOLLIN, {.u64 = i}};
    if (::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, conn.fd.get(), &ev) != 0)
      return fail(fmt::format("epoll_ctl: {}", std::strerror(errno)));
    conns_.push_back(std::move(conn));
  }
  return {};
}

std::string LoadRun::request() {
  std::string out;
  if (c_.command == "get") {
    append_resp_command(out, {"GET", "key:__rand_int__"});  // valkey-benchmark -t get's key
    return out;
  }
  key_state_ += 0x9e3779b97f4a7c15ULL;  // SplitMix64: keys spread over --keyspace
  uint64_t z = key_state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  const std::string key = fmt::format("key:{:012}", (z ^ (z >> 31)) % c_.keyspace);
  append_resp_command(out, {"SET", key, std::string(c_.value_size, 'x')});
  return out;
}

// Every request due by `now` appended to its connection, stamped with its intended time.
void LoadRun::schedule(int64_t now) {
  const double interval = 1e9 / c_.rate;
  while (next_ < total_) {
    const int64_t due = t0_ + static_cast<int64_t>(std::llround(static_cast<double>(next_) * interval));
    if (due > now) break;
    Conn& conn = conns_[next_ % conns_.size()];
    conn.out += request();
    conn.intended.push_back({due, now});
    lag_.record(static_cast<uint64_t>(std::max<int64_t>(now - due, 1)));
    late_ += now - due > kLateNs;
    ++next_;
  }
}

void LoadRun::want_out(size_t i, bool on) {
  Conn& conn = conns_[i];
  if (conn.watching_out == on) return;
  epoll_event ev{EPOLLIN | (on ? EPOLLOUT : 0u), {.u64 = i}};
  (void)::epoll_ctl(ep_.get(), EPOLL_CTL_MOD, conn.fd.get(), &ev);
  conn.watching_out = on;
}

Status LoadRun::flush(size_t i) {
  Conn& conn = conns_[i];
  while (!conn.out.empty()) {
    const ssize_t n = ::send(conn.fd.get(), conn.out.data(), conn.out.size(),
                             MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
    if (n < 0) return fail(fmt::format("connection {}: send: {}", i, std::strerror(errno)));
    conn.out.erase(0, static_cast<size_t>(n));
  }
  want_out(i, !conn.out.empty());
  return {};
}

Status LoadRun::read_replies(size_t i, int64_t now) {
  Conn& conn = conns_[i];
  char buf[65536];
  for (;;) {
    const ssize_t n = ::recv(conn.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0)
      return fail(fmt::format("connection {} closed by the server after {} replies", i, answered_));
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
    if (n < 0) return fail(fmt::format("connection {}: recv: {}", i, std::strerror(errno)));
    conn.in.append(buf, static_cast<size_t>(n));
    if (static_cast<size_t>(n) < sizeof buf) break;
  }
  size_t at = 0;
  for (;;) {
    const RespReply r = frame_resp_reply(std::string_view(conn.in).substr(at), c_.max_reply);
    if (r.malformed) return fail(fmt::format("connection {}: a reply that is not RESP", i));
    if (r.too_large)
      return fail(fmt::format("connection {}: the server announced a reply of {} (bytes or "
                              "elements), above --max-reply {}",
                              i, r.too_large, format_bytes_human(c_.max_reply)));
    if (r.length == 0) {
      if (conn.in.size() - at > c_.max_reply)
        return fail(fmt::format("connection {}: {} of one reply received and not yet complete, "
                                "above --max-reply {}",
                                i, format_bytes_human(conn.in.size() - at),
                                format_bytes_human(c_.max_reply)));
      break;
    }
    if (conn.intended.empty())
      return fail(fmt::format("connection {}: a reply to no request", i));
    const auto [due, queued] = conn.intended.front();
    conn.intended.pop_front();
    const auto latency = static_cast<uint64_t>(std::max<int64_t>(now - due, 1));
    all_.record(latency);
    from_send_.record(static_cast<uint64_t>(std::max<int64_t>(now - queued, 1)));
    slices_[static_cast<size_t>((due - t0_) / slice_ns_)].record(latency);
    ++answered_;
    errors_ += r.error;
    at += r.length;
  }
  conn.in.erase(0, at);
  return {};
}

Status LoadRun::run() {
  (void)::prctl(PR_SET_TIMERSLACK, 1UL);  // wake at the next intended time, not 50 µs after
  total_ = static_cast<uint64_t>(std::llround(c_.rate * c_.duration_s));
  slice_ns_ = static_cast<int64_t>(c_.slice_s * 1e9);
  slices_.resize(static_cast<size_t>(c_.duration_s / c_.slice_s) + 2);
  t0_ = monotonic_ns() + 10'000'000;  // 10 ms: every connection's first request at its time
  wall0_ = realtime_ns() + (t0_ - monotonic_ns());
  const int64_t send_end = t0_ + static_cast<int64_t>(c_.duration_s * 1e9);
  const int64_t drain_end = send_end + static_cast<int64_t>(c_.drain_s * 1e9);
  std::vector<epoll_event> events(conns_.size());
  for (;;) {
    int64_t now = monotonic_ns();
    schedule(now);
    for (size_t i = 0; i < conns_.size(); ++i)
      if (!conns_[i].out.empty() && !conns_[i].watching_out)
        if (auto st = flush(i); !st) return st;
    const bool sent_all = next_ == total_;
    if (sent_all && answered_ == total_) return {};
    if (now >= drain_end || interrupt::received()) return {};
    const int64_t wake =
        sent_all ? drain_end
                 : t0_ + static_cast<int64_t>(std::llround(static_cast<double>(next_) * 1e9 / c_.rate));
    const int64_t wait = std::max<int64_t>(wake - now, 0);
    const timespec ts{static_cast<time_t>(wait / 1'000'000'000), static_cast<long>(wait % 1'000'000'000)};
    const int n = ::epoll_pwait2(ep_.get(), events.data(), static_cast<int>(events.size()), &ts,
                                 nullptr);
    if (n < 0 && errno != EINTR) return fail(fmt::format("epoll_pwait2: {}", std::strerror(errno)));
    now = monotonic_ns();
    for (int k = 0; k < n; ++k) {
      const auto i = static_cast<size_t>(events[k].data.u64);
      if (events[k].events & EPOLLOUT)
        if (auto st = flush(i); !st) return st;
      if (events[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
        if (auto st = read_replies(i, now); !st) return st;
    }
  }
}

nlohmann::json LoadRun::json() const {
  nlohmann::json slices = nlohmann::json::array();
  for (size_t s = 0; s < slices_.size(); ++s) {
    const LogLinearHistogram& h = slices_[s];
    if (h.count() == 0) continue;
    slices.push_back({{"start_unix_ns", wall0_ + static_cast<int64_t>(s) * slice_ns_},
                      {"latency_us", quantiles_us(h)},
                      {"buckets", buckets_json(h)}});
  }
  return {
      {"tool", "iobench load"},
      {"version", IOBENCH_VERSION},
      {"target", c_.connect},
      {"command", c_.command},
      {"rate", c_.rate},
      {"conns", c_.conns},
      {"duration_s", c_.duration_s},
      {"slice_s", c_.slice_s},
      {"start_unix_ns", wall0_},
      {"histogram", histogram_layout_json()},
      {"requests", {{"scheduled", total_}, {"sent", next_}, {"answered", answered_},
                    {"errors", errors_}, {"unanswered", unanswered()}}},
      {"send_lag_us", {{"quantiles", quantiles_us(lag_)}, {"late_1ms", late_}}},
      {"latency_us", quantiles_us(all_)},
      {"latency_from_send_us", quantiles_us(from_send_)},
      {"slices", std::move(slices)},
      {"context", collect_context()},
      {"sources",
       {{"latency", "per request: CLOCK_MONOTONIC when the read completing its reply returned, "
                    "minus its intended send time t0 + k / rate (open loop: sends never wait "
                    "for replies)"},
        {"slices", "requests by intended send time, --slice long, stamped with CLOCK_REALTIME "
                   "at each slice's start"},
        {"latency_from_send", "per request: the same reply time minus when the request was "
                              "handed to send(), as valkey-benchmark measures"},
        {"send_lag", "how far past its intended time each request was handed to send(): the "
                     "generator's own lateness, inside latency_us"}}},
  };
}

void LoadRun::print_summary() const {
  auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1000.0; };
  fmt::print("load: {} {} requests at {:g}/s over {} connections to {}: {} answered, {} errors, "
             "{} unanswered\n",
             next_, c_.command, c_.rate, c_.conns, c_.connect, answered_, errors_, unanswered());
  fmt::print("latency from intended send (µs): p50 {:.1f}  p99 {:.1f}  p99.9 {:.1f}  max {:.1f}\n",
             us(all_.at_quantile(0.5)), us(all_.at_quantile(0.99)), us(all_.at_quantile(0.999)),
             us(all_.max()));
  fmt::print("from the actual send (µs): p50 {:.1f}  p99 {:.1f}; the generator's own send lag: "
             "p50 {:.1f}  max {:.1f} µs, {} requests sent over 1 ms late\n",
             us(from_send_.at_quantile(0.5)), us(from_send_.at_quantile(0.99)),
             us(lag_.at_quantile(0.5)), us(lag_.max()), late_);
}

}  // namespace

int run_load_command(const LoadCommand& c) {
  auto files = ReportFiles::open(c.json_path, "");
  if (!files) {
    print_error(files.error().message);
    return 2;
  }
  LoadRun load(c);
  if (auto st = load.connect(); !st) {
    print_error(st.error().message);
    return 1;
  }
  const Status ran = load.run();
  if (!c.quiet && c.json_path != "-") load.print_summary();
  if (files->json.is_open())
    if (auto st = files->json.write(load.json().dump(2) + "\n"); !st) {
      print_error(st.error().message);
      return 1;
    }
  if (!ran) {
    print_error(ran.error().message);
    return 1;
  }
  return 0;
}

}  // namespace iobench
