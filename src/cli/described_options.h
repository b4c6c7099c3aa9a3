// Command-line options from described structs (util/fields.h): every option of every command is
// a Field of some block, declared here from its flag, help and bounds, and read back here. The
// commands (options.cc, client_options.cc) only say which blocks each command takes and check
// how options combine. Internal to src/cli.
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <map>
#include <string>
#include <type_traits>

#include "util/fields.h"
#include "util/names.h"
#include "util/result.h"
#include "util/size.h"

namespace iobench {

// Fields typed as text (enum names, sizes, durations), by flag, until parse_described reads them.
struct TypedText {
  std::map<std::string, std::string> by_flag;
  bool typed(std::string_view flag) const {
    const auto it = by_flag.find(std::string(flag));
    return it != by_flag.end() && !it->second.empty();
  }
};

// CLI11 reads "-1" into an unsigned option as 2^64-1: refuse a sign instead.
inline CLI::Option* unsigned_option(CLI::Option* opt) {
  return opt->check(CLI::Validator(
      [](const std::string& v) -> std::string {
        if (v.find('-') == std::string::npos) return {};
        return fmt::format("'{}' is negative (expected 0 or more)", v);
      },
      "", "not negative"));
}

// CLI11's own refusal of "x1" for a number names neither the value's fault nor the remedy.
inline CLI::Option* whole_number_option(CLI::Option* opt) {
  return opt->check(CLI::Validator(
      [](const std::string& v) -> std::string {
        const size_t digits = v.starts_with('-') ? 1 : 0;
        if (v.size() > digits && v.find_first_not_of("0123456789", digits) == std::string::npos)
          return {};
        return fmt::format("'{}' is not a whole number", v);
      },
      "", "whole number"));
}

// What an option's value is, in --help: an enum's names (tcp|tls) while they fit, else NAME.
template <NamedEnum V>
std::string enum_placeholder(std::string_view choices) {
  std::string names;
  if (!choices.empty()) {
    names = std::string(choices);
    std::replace(names.begin(), names.end(), ',', '|');
  } else {
    for (const auto& [value, name] : Names<V>::table) names += (names.empty() ? "" : "|") + std::string(name);
  }
  return names.size() <= 24 ? names : "NAME";
}

// One option per field of `s` that has a flag (and is not only another command's), in its --help
// group: a flag for a bool (a negated one turns it off), else a value (an enum's name, a size's
// or a duration's text into `text`, for parse_described). A flattened block's fields are its
// parent's; other nested blocks are declared by their own call.
template <Described T>
void add_described(CLI::App& app, T& s, TypedText& text, const char* group) {
  describe(s, [&](const Field& f, auto& v) {
    using V = std::decay_t<decltype(v)>;
    if constexpr (Described<V>)
      if (f.flatten) add_described(app, v, text, group);
    if (f.flag.empty() || (!f.only_in.empty() && f.only_in != app.get_name())) return;
    const std::string flag(f.flag), help(f.help);
    const std::string names = f.short_flag.empty() ? flag : flag + "," + std::string(f.short_flag);
    std::string& raw = text.by_flag[flag];
    CLI::Option* opt = nullptr;
    if constexpr (NamedEnum<V>) {
      opt = app.add_option(flag, raw, help)->type_name(enum_placeholder<V>(f.choices));
    } else if constexpr (std::is_same_v<V, bool>) {
      opt = f.negated ? app.add_flag_function(names, [&v](std::int64_t) { v = false; }, help)
                      : app.add_flag(names, v, help);
    } else if constexpr (std::is_unsigned_v<V>) {
      opt = f.size ? app.add_option(names, raw, help)->type_name("SIZE")
                   : unsigned_option(whole_number_option(app.add_option(names, v, help)))
                         ->type_name("N");
    } else if constexpr (std::is_integral_v<V>) {
      opt = whole_number_option(app.add_option(names, v, help))->type_name("N");
    } else if constexpr (std::is_floating_point_v<V>) {
      opt = f.duration ? app.add_option(names, raw, help)->type_name("DURATION")
                       : app.add_option(names, v, help)->type_name("NUMBER");
    } else if constexpr (!Described<V>) {
      opt = app.add_option(names, v, help);
    }
    if (!opt) return;
    opt->group(f.hidden ? "" : group);
    if (f.required) opt->required();
    if (!f.value_name.empty()) opt->type_name(std::string(f.value_name));
  });
}

// The fields add_described read as text: enums by name (within `choices` when given), sizes by
// parse_size within the bounds, durations by parse_duration. The first error wins.
template <Described T>
Status parse_described(T& s, const TypedText& text) {
  Status first;
  describe(s, [&](const Field& f, auto& v) {
    using V = std::decay_t<decltype(v)>;
    if constexpr (Described<V>)
      if (first && f.flatten) first = parse_described(v, text);
    const auto it = text.by_flag.find(std::string(f.flag));
    if (!first || f.flag.empty() || it == text.by_flag.end() || it->second.empty()) return;
    const std::string& typed = it->second;
    if constexpr (NamedEnum<V>) {
      auto e = parse_option<V>(f.flag, typed);
      if (e && !f.choices.empty() && !is_choice(f.choices, typed))
        e = fail(fmt::format("invalid {} '{}': expected {}", f.flag, typed,
                             choices_text(f.choices)));
      if (e)
        v = *e;
      else
        first = std::unexpected(e.error());
    } else if constexpr (std::is_unsigned_v<V> && !std::is_same_v<V, bool>) {
      if (!f.size) return;
      if (f.zero_is_unset && typed == "0") {  // "not set", as the default
        v = 0;
        return;
      }
      auto n = parse_size(typed, f.flag, static_cast<uint64_t>(f.min),
                          static_cast<uint64_t>(f.max));
      if (n)
        v = static_cast<V>(*n);
      else
        first = std::unexpected(n.error());
    } else if constexpr (std::is_floating_point_v<V>) {
      if (!f.duration) return;
      auto d = parse_duration(typed, f.flag, f.real_max);
      if (d && *d < f.real_min)
        d = fail(fmt::format("invalid {} '{}': at least {}", f.flag, typed,
                             f.real_min < 1 ? fmt::format("{:g}ms", f.real_min * 1000)
                                            : fmt::format("{:g}s", f.real_min)));
      if (d)
        v = *d;
      else
        first = std::unexpected(d.error());
    }
  });
  return first;
}

// parse_described, then every field's bounds (check_fields): a block's whole reading.
template <Described T>
Status read_described(T& s, const TypedText& text) {
  if (auto st = parse_described(s, text); !st) return st;
  return check_fields(s, true);
}

}  // namespace iobench
