// One description per field of a struct that crosses an edge (the command line, the HELLO, the
// JSON): its name, its command-line flag and meaning, and its bounds. Each such struct lists its
// fields once, in order, in a `describe(self, visit)` function found by argument-dependent
// lookup; the control protocol's codec and layout, the JSON writer, the option parser and the
// validation on both sides walk that list instead of naming the fields again.
#pragma once

#include <fmt/format.h>

#include <concepts>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "util/result.h"

namespace iobench {

struct Field {
  std::string_view name;       // in the HELLO layout and the JSON
  std::string_view flag = {};  // command-line spelling ("": not an option of its own)
  std::string_view help = {};  // --help and the man page
  int64_t min = std::numeric_limits<int64_t>::min();  // numbers: the accepted range
  int64_t max = std::numeric_limits<int64_t>::max();
  std::string_view choices = {};  // strings: the accepted values, comma-separated ("" : any)
  bool summed = false;  // a count: over several connections, the total is their sum
  bool size = false;    // a byte count, written on the command line as 16k, 4M (bounds in bytes)
  bool negated = false;  // a bool whose flag turns it off ("--no-nodelay"); on by default
  bool zero_is_unset = false;  // 0 or "" means "not set": unchecked, the JSON writes null
  // A nested block whose fields stand at its parent's level in the JSON and the CSV (the
  // engine's counts: "io_calls", not "io.io_calls"); on the wire it is a block like any.
  bool flatten = false;
  std::string_view short_flag = {};  // a one-letter alias ("-R")
  // Real numbers: the accepted range, the lower end excluded when `above_min` (a timeout > 0).
  double real_min = -std::numeric_limits<double>::infinity();
  double real_max = std::numeric_limits<double>::infinity();
  bool above_min = false;
  bool duration = false;  // seconds, written on the command line as 50ms, 2s (max: real_max)
  // An option of this process only (a local path, a secret, text parsed into other fields, where
  // the output goes): on the command line, in no report (the JSON options block, the CSV).
  bool unreported = false;
  bool required = false;  // the command refuses to run without it
  std::string_view only_in = {};  // the one command that takes it ("client"; "": each given it)
  std::string_view value_name = {};  // --help's word for the value ("PID", "FILE")
  bool hidden = false;  // in no --help (the build's own --manpage)
  bool has_range() const {
    return min != std::numeric_limits<int64_t>::min() || max != std::numeric_limits<int64_t>::max();
  }
};

// describe()'s constraint: Self is T or const T (one template serves reading and writing).
template <typename Self, typename T>
concept DescribesAs = std::is_same_v<std::remove_const_t<Self>, T>;

// A struct with a field list: describe(T&, visit) calls visit(Field, member) for each field.
template <typename T>
concept Described = requires(std::remove_const_t<T>& t) {
  describe(t, [](const Field&, auto&) {});
};

// Calls f(choice, is_last) for each entry of a comma-separated choices list.
template <typename F>
void for_each_choice(std::string_view choices, F&& f) {
  size_t start = 0;
  while (start <= choices.size()) {
    const size_t comma = std::min(choices.find(',', start), choices.size());
    f(choices.substr(start, comma - start), comma == choices.size());
    start = comma + 1;
  }
}

// "a,b,c" -> "a, b or c", as error messages list choices.
inline std::string choices_text(std::string_view choices) {
  std::string out;
  for_each_choice(choices, [&](std::string_view c, bool last) {
    if (!out.empty()) out += last ? " or " : ", ";
    out += c;
  });
  return out;
}

inline bool is_choice(std::string_view choices, std::string_view value) {
  bool found = false;
  for_each_choice(choices, [&](std::string_view c, bool) { found = found || c == value; });
  return found;
}

// Checks one value against its field's bounds. `as_flag`: the error names the command-line
// flag ("invalid --qd '0': expected 1..4096"); otherwise the field ("queue_depth 0 outside ...").
template <typename V>
Status check_field(const Field& f, const V& v, bool as_flag) {
  std::string value, expected;
  if constexpr (std::is_arithmetic_v<V> || std::is_same_v<V, std::string>)
    if (f.zero_is_unset && v == V{}) return {};
  if constexpr (std::is_same_v<V, std::string>) {
    if (f.choices.empty() || is_choice(f.choices, v)) return {};
    value = v;
    expected = choices_text(f.choices);
  } else if constexpr (std::is_integral_v<V> && !std::is_same_v<V, bool>) {
    if (!f.has_range() || (std::cmp_greater_equal(v, f.min) && std::cmp_less_equal(v, f.max)))
      return {};
    value = fmt::format("{}", v);
    expected = fmt::format("{}..{}", f.min, f.max);
  } else if constexpr (std::is_floating_point_v<V>) {
    if (v <= f.real_max && (f.above_min ? v > f.real_min : v >= f.real_min)) return {};
    value = fmt::format("{}", v);
    expected = f.above_min ? fmt::format("({}, {}]", f.real_min, f.real_max)
                           : fmt::format("{}..{}", f.real_min, f.real_max);
    if (f.duration) expected = "seconds in " + expected;
  } else {
    return {};
  }
  if (as_flag && !f.flag.empty())
    return fail(fmt::format("invalid {} '{}': expected {}", f.flag, value, expected));
  return fail(fmt::format("{} {} outside {}", f.name, value, expected));
}

namespace detail {

template <typename V>
inline constexpr bool kWholeNumber = std::is_integral_v<V> && !std::is_same_v<V, bool>;

// Every whole-number field's value of `s` and of the blocks inside it, in field-list order.
template <Described T>
void whole_numbers(const T& s, std::vector<uint64_t>& out) {
  describe(s, [&](const Field&, const auto& v) {
    using V = std::decay_t<decltype(v)>;
    if constexpr (Described<V>)
      whole_numbers(v, out);
    else if constexpr (kWholeNumber<V>)
      out.push_back(static_cast<uint64_t>(v));
  });
}

// Calls f(field, mine, theirs) for every whole-number field of `mine` (nested blocks' too) with
// the same field's value in `theirs` (read first: `theirs` may be `mine`).
template <Described T, typename F>
void zip_whole_numbers(T& mine, const T& theirs, F&& f) {
  std::vector<uint64_t> values;
  whole_numbers(theirs, values);
  size_t i = 0;
  auto walk = [&](auto& self, auto& block) -> void {
    describe(block, [&](const Field& field, auto& v) {
      using V = std::decay_t<decltype(v)>;
      if constexpr (Described<V>)
        self(self, v);
      else if constexpr (kWholeNumber<V>)
        f(field, v, values[i++]);
    });
  };
  walk(walk, mine);
}

}  // namespace detail

// Adds each summed field of `from` (nested blocks' too) to `into` (the counts of one connection
// to a run's total).
template <Described T>
void add_summed(T& into, const T& from) {
  detail::zip_whole_numbers(into, from, [](const Field& f, auto& v, uint64_t theirs) {
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, uint64_t>)
      if (f.summed) v += theirs;
  });
}

// Zeroes each summed field of `s` (nested blocks' too): a run's total before any connection's
// counts are added to it.
template <Described T>
void zero_summed(T& s) {
  detail::zip_whole_numbers(s, s, [](const Field& f, auto& v, uint64_t) {
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, uint64_t>)
      if (f.summed) v = 0;
  });
}

// `a` less `b`, every whole-number field (nested blocks' too): the delta between two readings
// of a block of counters. A field added to the block is subtracted with no line here.
template <Described T>
T fields_minus(const T& a, const T& b) {
  T out = a;
  detail::zip_whole_numbers(out, b, [](const Field&, auto& v, uint64_t theirs) {
    v = static_cast<std::decay_t<decltype(v)>>(static_cast<uint64_t>(v) - theirs);
  });
  return out;
}

// Checks every field of `s` (and of the described structs inside it); the first error wins.
template <Described T>
Status check_fields(const T& s, bool as_flag) {
  Status first;
  describe(s, [&](const Field& f, const auto& v) {
    if (!first) return;
    using V = std::decay_t<decltype(v)>;
    if constexpr (Described<V>)
      first = check_fields(v, as_flag);
    else
      first = check_field(f, v, as_flag);
  });
  return first;
}

}  // namespace iobench
