/* The floor: the least any program can do to move N bytes over loopback TCP in B-byte calls.
 * A forked receiver read()s B bytes at a time until EOF; the parent connect()s and write()s B
 * bytes at a time, both with TCP_NODELAY (as iobench and Valkey's replication link), then reaps
 * the receiver. No checksum, no control messages, no counters. The source is one hot B-byte
 * buffer (as iperf3 sends) or, with a FILE, that file mapped and cycled through (the pages
 * iobench sends from), so a comparison can tell the two costs apart.
 *
 *   iobench-floor BUF_BYTES TOTAL_BYTES [FILE]
 *
 * IOBENCH_FLOOR_CPUS=S,R pins the sender to CPU S and the receiver to CPU R (as iobench --cpus
 * S,R and iperf3 -A S,R), so a comparison can place every tool's two sides alike.
 * IOBENCH_FLOOR_XXH3=1 makes the receiver hash every byte it reads (XXH3-64, libxxhash's runtime
 * dispatch, as iobench's receiver verifies): the least a tool that checks every byte can do.
 *
 * Prints one line: "writes W segments S [xxh3 H]", S the sender's TCP segments out (TCP_INFO
 * after the receiver has read everything): how many writes left as one segment each.
 */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <sched.h>
#include <linux/tcp.h> /* tcp_info with tcpi_segs_out (glibc's lacks it) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>
/* libxxhash's runtime CPU dispatch (AVX-512 / AVX2 / SSE2) where it exists, as iobench's
 * receiver uses it (src/payload/xxh3_fast.h); elsewhere the portable update. */
#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
#include <xxh_x86dispatch.h>
#define floor_xxh3_update XXH3_64bits_update_dispatch
#else
#define floor_xxh3_update XXH3_64bits_update
#endif

static void die(const char* what) {
  perror(what);
  exit(1);
}

static int nodelay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) die("TCP_NODELAY");
  return fd;
}

/* Reads to EOF; with `hash`, hashes every byte and writes the digest to `report` (the sender
 * prints it: the hash is the receiver's work, not dead code). */
static void receive(int listener, size_t buf_bytes, int hash, int report) {
  char* buf = malloc(buf_bytes);
  XXH3_state_t* state = hash ? XXH3_createState() : NULL;
  int fd = accept(listener, NULL, NULL);
  if (!buf || fd < 0 || (hash && !state)) die("receiver");
  nodelay(fd);
  if (state) XXH3_64bits_reset(state);
  for (;;) {
    ssize_t n = read(fd, buf, buf_bytes);
    if (n < 0) die("read");
    if (n == 0) break;
    if (state) floor_xxh3_update(state, buf, (size_t)n);
  }
  uint64_t digest = state ? XXH3_64bits_digest(state) : 0;
  if (write(report, &digest, sizeof digest) != (ssize_t)sizeof digest) die("report");
  _exit(0);
}

/* Pins this process to `cpu` (-1: leaves it). */
static void pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) die("sched_setaffinity");
}

static const char* source(const char* path, size_t buf_bytes, size_t* span) {
  if (!path) {
    char* hot = malloc(buf_bytes);
    if (!hot) die("malloc");
    memset(hot, 'x', buf_bytes);
    *span = buf_bytes;
    return hot;
  }
  int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || (size_t)st.st_size < buf_bytes) die(path);
  void* p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) die("mmap");
  *span = (size_t)st.st_size / buf_bytes * buf_bytes;
  return p;
}

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: iobench-floor BUF_BYTES TOTAL_BYTES [FILE]\n");
    return 2;
  }
  size_t buf_bytes = strtoull(argv[1], NULL, 10), total = strtoull(argv[2], NULL, 10);
  if (buf_bytes == 0 || total == 0) {
    fprintf(stderr, "iobench-floor: invalid size '%s' or '%s'\n", argv[1], argv[2]);
    return 2;
  }
  size_t span = 0;
  const char* src = source(argc == 4 ? argv[3] : NULL, buf_bytes, &span);

  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0 || bind(listener, (struct sockaddr*)&a, sizeof a) != 0 ||
      listen(listener, 1) != 0 || getsockname(listener, (struct sockaddr*)&a, &len) != 0)
    die("listen");
  int sender_cpu = -1, receiver_cpu = -1;
  const char* cpus = getenv("IOBENCH_FLOOR_CPUS");
  if (cpus && sscanf(cpus, "%d,%d", &sender_cpu, &receiver_cpu) != 2) {
    fprintf(stderr, "iobench-floor: invalid IOBENCH_FLOOR_CPUS '%s' (S,R)\n", cpus);
    return 2;
  }
  const char* xxh3 = getenv("IOBENCH_FLOOR_XXH3");
  const int hash = xxh3 && strcmp(xxh3, "1") == 0;
  if (xxh3 && !hash && strcmp(xxh3, "0") != 0) {
    fprintf(stderr, "iobench-floor: invalid IOBENCH_FLOOR_XXH3 '%s' (0 or 1)\n", xxh3);
    return 2;
  }
  int report[2];
  if (pipe(report) != 0) die("pipe");
  pid_t child = fork();
  if (child < 0) die("fork");
  if (child == 0) {
    close(report[0]);
    pin(receiver_cpu);
    receive(listener, buf_bytes, hash, report[1]);
  }
  close(report[1]);
  pin(sender_cpu);
  close(listener);

  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(nodelay(fd), (struct sockaddr*)&a, sizeof a) != 0) die("connect");
  size_t at = 0, writes = 0;
  for (size_t left = total; left > 0; ++writes) {
    size_t n = left < buf_bytes ? left : buf_bytes;
    ssize_t w = write(fd, src + at, n);
    if (w <= 0) die("write");
    left -= (size_t)w;
    at = (at + (size_t)w) % span;
  }
  if (shutdown(fd, SHUT_WR) != 0) die("shutdown");
  uint64_t digest = 0;
  int status = 0;
  if (read(report[0], &digest, sizeof digest) != (ssize_t)sizeof digest ||
      waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "iobench-floor: receiver failed\n");
    return 1;
  }
  struct tcp_info ti;
  socklen_t ti_len = sizeof ti;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &ti_len) != 0) die("TCP_INFO");
  close(fd);
  printf("writes %zu segments %u", writes, ti.tcpi_segs_out);
  if (hash) printf(" xxh3 %016llx", (unsigned long long)digest);
  printf("\n");
  return 0;
}
