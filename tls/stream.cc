// The TLS Stream. Socket model: OpenSSL on the descriptor (a counting socket BIO), partial writes
// so one SSL_write returns per record, as Valkey's connTLSWrite. BIO model: our own memory BIO;
// this Stream issues every read(2)/write(2) itself with the engine's buffer size.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "net/socket.h"
#include "probe/probe.h"
#include "tls/tls.h"

namespace iobench::tls {

// The BIO model's buffers. Ciphertext in: read(2) (or an engine) appends at in_len, OpenSSL
// reads from in_pos. Ciphertext out: OpenSSL appends, write(2) (or an engine) sends from
// out_pos, so a partial write on a non-blocking socket resumes where the kernel stopped.
struct MemBioState {
  std::vector<std::byte> in;
  size_t in_pos = 0, in_len = 0;
  size_t net_buf = 0;  // what one read(2) asks for
  std::vector<std::byte> out;
  size_t out_pos = 0;
};

struct Callbacks {
  // Socket model: every BIO read/write on a socket BIO is one syscall.
  static long count_syscalls(BIO* b, int oper, const char*, size_t, int, long, int ret, size_t*) {
    auto* s = reinterpret_cast<TlsStream*>(BIO_get_callback_arg(b));
    if (oper == (BIO_CB_READ | BIO_CB_RETURN)) ++s->counters_.sys_reads;
    if (oper == (BIO_CB_WRITE | BIO_CB_RETURN)) {
      ++s->counters_.sys_writes;
      sample_send_queue(s->fd_, s->counters_);
    }
    return ret;
  }
  // Every record header, either direction, passes here (content type SSL3_RT_HEADER).
  static void count_records(int write_p, int, int content_type, const void*, size_t, SSL*,
                            void* arg) {
    if (content_type != SSL3_RT_HEADER) return;
    auto* s = static_cast<TlsStream*>(arg);
    ++(write_p ? s->counters_.records_out : s->counters_.records_in);
  }
  static int mem_write(BIO* b, const char* data, size_t len, size_t* written) {
    auto* st = static_cast<MemBioState*>(BIO_get_data(b));
    const auto* p = reinterpret_cast<const std::byte*>(data);
    st->out.insert(st->out.end(), p, p + len);
    *written = len;
    return 1;
  }
  static int mem_read(BIO* b, char* data, size_t len, size_t* read) {
    auto* st = static_cast<MemBioState*>(BIO_get_data(b));
    BIO_clear_retry_flags(b);
    const size_t avail = st->in_len - st->in_pos;
    if (avail == 0) {
      BIO_set_retry_read(b);
      return 0;
    }
    const size_t n = std::min(len, avail);
    std::memcpy(data, st->in.data() + st->in_pos, n);
    st->in_pos += n;
    *read = n;
    return 1;
  }
  static long mem_ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }
  static const BIO_METHOD* mem_method() {
    static BIO_METHOD* m = [] {
      BIO_METHOD* bm = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "iobench-mem");
      BIO_meth_set_write_ex(bm, mem_write);
      BIO_meth_set_read_ex(bm, mem_read);
      BIO_meth_set_ctrl(bm, mem_ctrl);
      return bm;
    }();
    return m;
  }
};

namespace {
bool is_ip_literal(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

std::string verify_failure(SSL* ssl, const std::string& fallback) {
  const long v = SSL_get_verify_result(ssl);
  if (v != X509_V_OK) {
    ERR_clear_error();
    return fmt::format("certificate verify failed: {}", X509_verify_cert_error_string(v));
  }
  return fallback;
}
}  // namespace

TlsStream::TlsStream(SSL* ssl, int fd, const Context& ctx)
    : ssl_(ssl), fd_(fd), ktls_status_(ctx.ktls_status()) {
  BIO* sock = BIO_new_socket(fd, BIO_NOCLOSE);
  BIO_set_callback_ex(sock, Callbacks::count_syscalls);
  BIO_set_callback_arg(sock, reinterpret_cast<char*>(this));
  SSL_set_bio(ssl_, sock, sock);
  SSL_set_msg_callback(ssl_, Callbacks::count_records);
  SSL_set_msg_callback_arg(ssl_, this);
}

TlsStream::~TlsStream() { SSL_free(ssl_); }

Result<std::unique_ptr<TlsStream>> TlsStream::connect(const Context& ctx, int fd,
                                                      const std::string& host) {
  SSL* ssl = SSL_new(ctx.get());
  if (!ssl) return fail(last_ssl_error("SSL_new failed"));
  std::unique_ptr<TlsStream> s(new TlsStream(ssl, fd, ctx));
  const TlsOptions& o = ctx.options();
  const std::string name = o.server_name.empty() ? host : o.server_name;
  if (!is_ip_literal(name)) SSL_set_tlsext_host_name(ssl, name.c_str());
  if (!o.insecure) {
    const int ok = is_ip_literal(name)
                       ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str())
                       : SSL_set1_host(ssl, name.c_str());
    if (ok != 1) return fail(fmt::format("cannot verify against name '{}'", name));
  }
  const int rc = s->handshake(SSL_connect);
  if (rc != 1) {
    IoResult r = s->fail_from(rc);
    return fail(verify_failure(ssl, s->describe(r)));
  }
  s->verified_ = !o.insecure;
  return s;
}

Result<std::unique_ptr<TlsStream>> TlsStream::accept(const Context& ctx, int fd) {
  SSL* ssl = SSL_new(ctx.get());
  if (!ssl) return fail(last_ssl_error("SSL_new failed"));
  std::unique_ptr<TlsStream> s(new TlsStream(ssl, fd, ctx));
  const int rc = s->handshake(SSL_accept);
  if (rc != 1) return fail(s->describe(s->fail_from(rc)));
  return s;
}

int TlsStream::handshake(int (*step)(SSL*)) {
  ERR_clear_error();
  const int64_t t0 = monotonic_ns();
  int rc;
  do {
    errno = 0;
    rc = step(ssl_);
  } while (rc <= 0 && SSL_get_error(ssl_, rc) == SSL_ERROR_WANT_READ && errno == EINTR);
  handshake_ns_ = monotonic_ns() - t0;
  return rc;
}

Status TlsStream::configure(TlsIo io, bool read_ahead, uint64_t max_fragment,
                            uint64_t net_buf_bytes) {
  SSL_set_read_ahead(ssl_, read_ahead ? 1 : 0);
  if (SSL_set_max_send_fragment(ssl_, static_cast<long>(max_fragment)) != 1)
    return fail(fmt::format("max send fragment {}: {}", max_fragment, last_ssl_error("refused")));
  max_fragment_ = max_fragment;
  if (io == TlsIo::kSocket) {
    // As Valkey: SSL_write returns once a record is written, and may be retried from a new address.
    SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    return {};
  }
  if (io != TlsIo::kBio) return fail("TLS I/O model auto must be resolved before configure");
  if (BIO_get_ktls_send(SSL_get_wbio(ssl_)) || BIO_get_ktls_recv(SSL_get_rbio(ssl_)))
    return fail("kTLS is engaged on this session: the bio model cannot take over");
  if (!bio_model_) {
    mem_ = std::make_unique<MemBioState>();
    mem_->in.resize(net_buf_bytes);
    mem_->net_buf = net_buf_bytes;
    BIO* mem = BIO_new(Callbacks::mem_method());
    BIO_set_data(mem, mem_.get());
    BIO_set_init(mem, 1);
    SSL_set_bio(ssl_, mem, mem);  // frees the socket BIO; the descriptor stays open
    bio_model_ = true;
  }
  return {};
}

IoResult TlsStream::flush_wbio() {
  MemBioState& st = *mem_;
  size_t done = 0;
  while (st.out_pos < st.out.size()) {
    ++counters_.sys_writes;
    const ssize_t n = ::write(fd_, st.out.data() + st.out_pos, st.out.size() - st.out_pos);
    sample_send_queue(fd_, counters_);
    if (n < 0 && errno == EINTR) continue;
    // What the kernel did not take stays in the outbox for the next flush.
    if (n < 0) return io_result_from_syscall(n, nonblocking_);
    st.out_pos += static_cast<size_t>(n);
    done += static_cast<size_t>(n);
  }
  sent(0);
  return {IoResult::State::kOk, done, 0};
}

IoResult TlsStream::fill_rbio() {
  const std::span<std::byte> space = inbox_space(mem_->net_buf);
  ssize_t n;
  do {
    ++counters_.sys_reads;
    n = ::read(fd_, space.data(), space.size());
  } while (n < 0 && errno == EINTR);
  if (n == 0) {
    last_error_ = "peer closed without close_notify (truncated stream)";
    return {IoResult::State::kError, 0, 0};
  }
  if (n < 0) return io_result_from_syscall(n, nonblocking_);
  received(static_cast<size_t>(n));
  return {IoResult::State::kOk, static_cast<size_t>(n), 0};
}

Status TlsStream::seal(std::span<const std::byte> plain) {
  size_t off = 0;
  while (off < plain.size()) {
    const int len = static_cast<int>(std::min<size_t>(plain.size() - off, INT32_MAX));
    const int n = SSL_write(ssl_, plain.data() + off, len);
    if (n <= 0) return fail(describe(fail_from(n)));
    off += static_cast<size_t>(n);
  }
  return {};
}

std::span<const std::byte> TlsStream::outbox() const {
  return std::span<const std::byte>(mem_->out).subspan(mem_->out_pos);
}

void TlsStream::sent(size_t n) {
  MemBioState& st = *mem_;
  st.out_pos += n;
  if (st.out_pos >= st.out.size()) {
    st.out.clear();  // keeps the capacity: the next records are encrypted into the same memory
    st.out_pos = 0;
  }
}

std::span<std::byte> TlsStream::inbox_space(size_t n) {
  MemBioState& st = *mem_;
  if (st.in_pos == st.in_len) {
    st.in_pos = st.in_len = 0;
  } else if (st.in_pos > 0 && st.in.size() - st.in_len < n) {
    // Unread bytes (the start of a record) move to the front so the buffer does not grow.
    std::memmove(st.in.data(), st.in.data() + st.in_pos, st.in_len - st.in_pos);
    st.in_len -= st.in_pos;
    st.in_pos = 0;
  }
  if (st.in.size() - st.in_len < n) st.in.resize(st.in_len + n);
  return {st.in.data() + st.in_len, n};
}

void TlsStream::received(size_t n) { mem_->in_len += n; }

size_t TlsStream::inbox_pending() const { return mem_->in_len - mem_->in_pos; }

IoResult TlsStream::open(std::span<std::byte> plain) {
  const int len = static_cast<int>(std::min<size_t>(plain.size(), INT32_MAX));
  errno = 0;
  const int n = SSL_read(ssl_, plain.data(), len);
  if (n > 0) return {IoResult::State::kOk, static_cast<size_t>(n), 0};
  if (SSL_get_error(ssl_, n) == SSL_ERROR_WANT_READ) return {IoResult::State::kWouldBlock, 0, 0};
  return fail_from(n);
}

IoResult TlsStream::fail_from(int ret) {
  const int e = SSL_get_error(ssl_, ret);
  switch (e) {
    case SSL_ERROR_ZERO_RETURN:
      return {IoResult::State::kEof, 0, 0};
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      // A blocking socket only "wants" more when SO_RCVTIMEO/SO_SNDTIMEO expired.
      return {nonblocking_ ? IoResult::State::kWouldBlock : IoResult::State::kTimedOut, 0, EAGAIN};
    case SSL_ERROR_SYSCALL: {
      const int err = errno;
      if (ERR_peek_error() == 0 && err == 0) {
        last_error_ = "peer closed without close_notify (truncated stream)";
        return {IoResult::State::kError, 0, 0};
      }
      if (ERR_peek_error() == 0) return {IoResult::State::kError, 0, err};
      last_error_ = last_ssl_error("TLS error");
      return {IoResult::State::kError, 0, 0};
    }
    default: {
      const unsigned long code = ERR_peek_error();
      last_error_ = ERR_GET_REASON(code) == SSL_R_UNEXPECTED_EOF_WHILE_READING
                        ? (ERR_clear_error(), "peer closed without close_notify (truncated stream)")
                        : last_ssl_error("TLS error");
      return {IoResult::State::kError, 0, 0};
    }
  }
}

IoResult TlsStream::read(std::span<std::byte> buf) {
  const int len = static_cast<int>(std::min<size_t>(buf.size(), INT32_MAX));
  while (true) {
    errno = 0;
    const int n = SSL_read(ssl_, buf.data(), len);
    if (n > 0) return {IoResult::State::kOk, static_cast<size_t>(n), 0};
    if (!bio_model_) {
      if (SSL_get_error(ssl_, n) == SSL_ERROR_WANT_READ && errno == EINTR) continue;
      return fail_from(n);
    }
    const int e = SSL_get_error(ssl_, n);
    if (e != SSL_ERROR_WANT_READ) return fail_from(n);
    // OpenSSL may have queued bytes to send (an alert, a key update answer) before blocking.
    // If the socket will not take them now, reading goes on: the next call tries again.
    if (!outbox().empty()) {
      IoResult w = flush_wbio();
      if (!w.ok() && w.state != IoResult::State::kWouldBlock) return w;
    }
    if (IoResult r = fill_rbio(); !r.ok()) return r;
  }
}

IoResult TlsStream::write(std::span<const std::byte> buf) {
  // Bio model: records an earlier call encrypted but could not send go first; until they are
  // out, nothing new is accepted.
  if (bio_model_ && !outbox().empty()) {
    if (IoResult w = flush_wbio(); !w.ok()) return w;
  }
  const int len = static_cast<int>(std::min<size_t>(buf.size(), INT32_MAX));
  while (true) {
    errno = 0;
    const int n = SSL_write(ssl_, buf.data(), len);
    if (n > 0) {
      if (bio_model_) {
        // All records of this buffer leave in one write(2) (more only if the kernel takes less);
        // on a non-blocking socket what is left waits for flush() or the next write().
        IoResult w = flush_wbio();
        if (!w.ok() && w.state != IoResult::State::kWouldBlock) return w;
      }
      return {IoResult::State::kOk, static_cast<size_t>(n), 0};
    }
    if (SSL_get_error(ssl_, n) == SSL_ERROR_WANT_WRITE && errno == EINTR) continue;
    return fail_from(n);
  }
}

IoResult TlsStream::flush() {
  if (!bio_model_ || outbox().empty()) return {};
  return flush_wbio();
}

std::string TlsStream::describe(const IoResult& r) const {
  if (r.state == IoResult::State::kEof) return "peer ended the TLS session (close_notify)";
  if (r.state == IoResult::State::kError && r.err == 0 && !last_error_.empty()) return last_error_;
  return describe_io(r);
}

void TlsStream::close() {
  if (SSL_get_shutdown(ssl_) & SSL_SENT_SHUTDOWN) return;
  SSL_shutdown(ssl_);
  if (bio_model_) (void)flush_wbio();
  ERR_clear_error();
}

std::optional<TlsInfo> TlsStream::tls_info() const {
  TlsInfo i;
  i.version = SSL_get_version(ssl_);
  i.cipher = SSL_get_cipher_name(ssl_);
  const int group = static_cast<int>(SSL_get_negotiated_group(ssl_));
  const char* gname = group ? SSL_group_to_name(ssl_, group) : nullptr;
  i.group = gname ? gname : "unknown";
  i.handshake_ns = handshake_ns_;
  i.io = bio_model_ ? "bio" : "socket";
  i.read_ahead = SSL_get_read_ahead(ssl_) != 0;
  i.max_fragment = max_fragment_;
  i.ktls_send = !bio_model_ && BIO_get_ktls_send(SSL_get_wbio(ssl_));
  i.ktls_recv = !bio_model_ && BIO_get_ktls_recv(SSL_get_rbio(ssl_));
  i.ktls = ktls_status_;
  if (ktls_status_ == "requested")
    i.ktls = fmt::format("enabled: send {}, recv {}", i.ktls_send ? "yes" : "no",
                         i.ktls_recv ? "yes" : "no");
  i.verified = verified_;
  return i;
}

}  // namespace iobench::tls
