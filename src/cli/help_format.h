// --help that fits a 100-column terminal: each option's description wrapped under its own
// column (CLI11 2.3 prints it on one line, up to 263 columns here). Internal to src/cli.
#pragma once

#include <CLI/CLI.hpp>
#include <sstream>
#include <string>

namespace iobench {

inline constexpr size_t kHelpWidth = 100;

// Words of `text` in lines of at most `width` columns (a longer word gets a line of its own),
// joined by '\n': CLI11 indents each continuation line to the description's column.
inline std::string wrap_words(const std::string& text, size_t width) {
  std::string out, line;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = std::min(text.find(' ', pos), text.size());
    const std::string word = text.substr(pos, end - pos);
    pos = end + 1;
    if (word.empty()) continue;
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + '\n';
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  return out + line;
}

class WrappingFormatter : public CLI::Formatter {
 public:
  WrappingFormatter() { column_width(30); }
  std::string make_option_desc(const CLI::Option* opt) const override {
    return wrap_words(CLI::Formatter::make_option_desc(opt), kHelpWidth - get_column_width());
  }
  std::string make_subcommand(const CLI::App* sub) const override {
    std::stringstream out;
    CLI::detail::format_help(out, sub->get_display_name(true),
                             wrap_words(sub->get_description(), kHelpWidth - get_column_width()),
                             get_column_width());
    return out.str();
  }
};

}  // namespace iobench
