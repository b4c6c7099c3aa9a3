// Errors as values: every fallible call returns Result<T>; main() turns an Error into one line.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <expected>
#include <string>
#include <string_view>
#include <utility>

namespace iobench {

// What kind of failure, where a caller acts on it (never by the message's wording).
enum class ErrorKind {
  kOther,
  kTimedOut,  // no progress within the time allowed
  kNotPeer,   // the peer speaks another protocol
  kRefused,   // the peer's credentials were refused (a wrong or missing token)
  kFull,      // a shared resource (the server's memory budget) had no room for the request
};

struct Error {
  std::string message;
  ErrorKind kind = ErrorKind::kOther;
  int sys_errno = 0;  // the errno behind it, where a caller acts on which (accept's EMFILE)
};

template <typename T>
using Result = std::expected<T, Error>;

using Status = std::expected<void, Error>;

inline std::unexpected<Error> fail(std::string message, ErrorKind kind = ErrorKind::kOther) {
  return std::unexpected<Error>(Error{std::move(message), kind});
}

// The one line a command prints before it exits non-zero: "iobench: error: MESSAGE".
inline void print_error(std::string_view message) {
  fmt::print(stderr, "iobench: error: {}\n", message);
}

}  // namespace iobench
