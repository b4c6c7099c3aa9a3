// One name table per enum that crosses an edge (the command line, the HELLO, the JSON): the only
// place its values are spelled. Text becomes the enum where it enters (parse_name) and a name
// again where it leaves (name_of); in between, code compares values, never strings.
#pragma once

#include <fmt/format.h>

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "util/result.h"

namespace iobench {

// Specialised per enum: static constexpr std::array<std::pair<E, std::string_view>, N> table.
template <typename E>
struct Names;

template <typename E>
concept NamedEnum = requires {
  Names<E>::table;
};

template <NamedEnum E>
constexpr std::string_view name_of(E e) {
  for (const auto& [value, name] : Names<E>::table)
    if (value == e) return name;
  return "?";
}

template <NamedEnum E>
constexpr std::optional<E> parse_name(std::string_view text) {
  for (const auto& [value, name] : Names<E>::table)
    if (name == text) return value;
  return std::nullopt;
}

// "a, b or c": the accepted names, as error messages and --help list them.
template <NamedEnum E>
std::string names_text() {
  std::string out;
  const auto& t = Names<E>::table;
  for (size_t i = 0; i < t.size(); ++i) {
    if (i > 0) out += i + 1 == t.size() ? " or " : ", ";
    out += t[i].second;
  }
  return out;
}

// `text` as an E, or "invalid FLAG 'text': expected a, b or c".
template <NamedEnum E>
Result<E> parse_option(std::string_view flag, std::string_view text) {
  if (auto e = parse_name<E>(text)) return *e;
  return fail(fmt::format("invalid {} '{}': expected {}", flag, text, names_text<E>()));
}

}  // namespace iobench
