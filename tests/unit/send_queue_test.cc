// The send queue as the writes find it (StreamCounters' queue sample, net/socket.cc).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "net/address.h"
#include "net/socket.h"
#include "net/stream.h"

namespace iobench {
namespace {

// Every kQueueSampleEvery-th write is sampled; with nobody reading, the queue holds what the
// peer's window could not take, so the samples see bytes waiting.
TEST(SendQueue, SampledEveryNthWriteOnTcp) {
  auto listener = listen_on(*parse_host_port("127.0.0.1:0", "test", 0, true));
  ASSERT_TRUE(listener) << listener.error().message;
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(listener->get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const uint16_t port = ntohs(reinterpret_cast<sockaddr_in&>(addr).sin_port);
  auto client = connect_to(*parse_host_port("127.0.0.1:" + std::to_string(port), "test", 0, true),
                           5, SocketOptions{});
  ASSERT_TRUE(client) << client.error().message;
  ASSERT_EQ(fcntl(client->get(), F_SETFL, O_NONBLOCK), 0);  // a full queue: EAGAIN, no hang
  FdStream s(client->get());
  const std::vector<std::byte> chunk(1024);
  for (uint64_t i = 0; i < 3 * kQueueSampleEvery; ++i) (void)s.write(chunk);
  EXPECT_EQ(s.counters().queue_samples, 3u);
  EXPECT_GT(s.counters().queue_unsent_bytes, 0u) << "nobody reads: bytes wait";
}

// A socket without a TCP send queue is not sampled, and the write's errno survives the ioctl.
TEST(SendQueue, NotSampledWithoutTcpAndErrnoKept) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  StreamCounters c;
  c.sys_writes = kQueueSampleEvery;
  errno = EAGAIN;
  sample_send_queue(fds[0], c);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(c.queue_samples, 0u);
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
}  // namespace iobench
