#include "watch/proc_watch.h"

#include <dirent.h>
#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <sstream>

namespace iobench {

std::optional<ProcStat> read_proc_stat(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  // "pid (comm) state ppid ..." — comm may hold spaces and parentheses: it ends at the last ')'.
  const size_t open = line.find('('), close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  ProcStat s;
  s.comm = line.substr(open + 1, close - open - 1);
  std::istringstream rest(line.substr(close + 1));
  std::string skip;
  rest >> s.state >> s.ppid;
  for (int field = 5; field < 14; ++field) rest >> skip;  // pgrp .. cmajflt
  rest >> s.utime >> s.stime >> s.cutime >> s.cstime;
  if (!rest) return std::nullopt;
  s.tgid = pid;
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  while (std::getline(status, line)) {
    if (line.starts_with("Tgid:")) {
      s.tgid = static_cast<pid_t>(std::stol(line.substr(5)));
      break;
    }
  }
  clockid_t clock{};
  timespec ts{};
  if (clock_getcpuclockid(pid, &clock) == 0 && clock_gettime(clock, &ts) == 0)
    s.cpu_ns = static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
  return s;
}

namespace {

// Socket inodes of one /proc/PID/net table (the inode is column 10 in tcp/udp, 7 in unix).
void read_socket_table(pid_t pid, const char* table, size_t inode_column, const char* kind,
                       std::map<uint64_t, std::string>& known) {
  std::ifstream in(fmt::format("/proc/{}/net/{}", pid, table));
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream cols(line);
    std::string col;
    for (size_t i = 0; i <= inode_column && cols >> col; ++i) {
      if (i == inode_column) known.emplace(std::stoull(col), kind);
    }
  }
}

std::string kind_of_link(const std::string& target, pid_t pid,
                         std::map<uint64_t, std::string>& known) {
  if (target.starts_with("pipe:")) return "pipe";
  if (target.starts_with("anon_inode:")) return "anon";
  if (target.starts_with("/dev/")) return "device";
  if (target.starts_with("/")) return "file";
  if (!target.starts_with("socket:[")) return "other";
  const uint64_t inode = std::stoull(target.substr(8));
  if (!known.contains(inode)) {
    for (const char* t : {"tcp", "tcp6"}) read_socket_table(pid, t, 9, "tcp", known);
    for (const char* t : {"udp", "udp6"}) read_socket_table(pid, t, 9, "udp", known);
    read_socket_table(pid, "unix", 6, "unix", known);
  }
  const auto it = known.find(inode);
  return it == known.end() ? "socket" : it->second;
}

}  // namespace

std::map<int, std::string> descriptor_kinds(pid_t pid,
                                            std::map<uint64_t, std::string>& known_sockets) {
  std::map<int, std::string> kinds;
  const std::string dir = fmt::format("/proc/{}/fd", pid);
  DIR* d = opendir(dir.c_str());
  if (!d) return kinds;
  std::array<char, 512> target{};
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const ssize_t n =
        readlink(fmt::format("{}/{}", dir, e->d_name).c_str(), target.data(), target.size() - 1);
    if (n <= 0) continue;
    kinds[std::stoi(e->d_name)] =
        kind_of_link(std::string(target.data(), static_cast<size_t>(n)), pid, known_sockets);
  }
  closedir(d);
  return kinds;
}

}  // namespace iobench
