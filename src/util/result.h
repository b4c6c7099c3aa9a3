// Errors as values: every fallible call returns Result<T>; main() turns an Error into one line.
#pragma once

#include <expected>
#include <string>
#include <utility>

namespace iobench {

struct Error {
  std::string message;
};

template <typename T>
using Result = std::expected<T, Error>;

using Status = std::expected<void, Error>;

inline std::unexpected<Error> fail(std::string message) {
  return std::unexpected<Error>(Error{std::move(message)});
}

}  // namespace iobench
