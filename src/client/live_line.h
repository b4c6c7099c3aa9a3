// What a person at a terminal sees during the runs: one line on stderr, redrawn four times a
// second, naming the size, the run (i of n) and the time and rate so far; erased when the run
// ends, so the table prints clean. Never on a pipe or a file, never with -q.
//
// Its cost is honest and small: a thread that wakes every 0.25 s, reads the connection's
// TCP_INFO and writes one line (tens of microseconds a second, inside the client's process
// CPU). There is no such thread during a counting run: that run's kernel counters count every
// thread of the process, so the line is drawn once before it and the thread is started per run.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace iobench {

class LiveLine {
 public:
  explicit LiveLine(bool enabled) : enabled_(enabled) {}
  ~LiveLine() { end_run(); }
  LiveLine(const LiveLine&) = delete;
  LiveLine& operator=(const LiveLine&) = delete;

  // A run begins: "16K run 2/5". `counting`: draw once, no thread until end_run().
  void begin_run(std::string label, uint64_t total_bytes, bool counting);
  // The run's connection (this side of it), for the bytes moved so far; -1 when there is none.
  void attach(int fd, bool sending);
  void detach();
  void end_run();  // stops the thread, erases the line

 private:
  void loop();
  void draw();
  bool enabled_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::thread thread_;
  bool stop_ = false, counting_ = false, drawn_ = false;
  std::string label_;
  uint64_t total_ = 0;
  int64_t start_ns_ = 0;
  std::atomic<int> fd_{-1};
  std::atomic<bool> sending_{true};
};

}  // namespace iobench
