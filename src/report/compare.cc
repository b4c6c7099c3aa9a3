#include "report/compare.h"

#include <fmt/format.h>

#include <fstream>
#include <functional>

#include "util/stats.h"

namespace iobench {
namespace {

using nlohmann::json;

struct Figure {
  const char* name;
  bool lower_is_better;
  std::function<double(const json&)> of;  // from one run's side
};

const std::vector<Figure>& figures() {
  static const std::vector<Figure> f{
      {"cpu_s_per_gib", true, [](const json& s) { return s.at("cpu_s_per_gib").get<double>(); }},
      {"throughput_gbps", false,
       [](const json& s) { return s.at("throughput_gbps").get<double>(); }},
      {"wall_s", true, [](const json& s) { return s.at("duration_ns").get<double>() / 1e9; }},
  };
  return f;
}

// The results (one per size) a side of the comparison names: one size, or all of them.
Result<std::vector<const json*>> sizes_of(const json& doc, const std::string& size,
                                          const char* which) {
  if (!doc.is_object() || !doc.contains("results") || !doc["results"].is_array())
    return fail(fmt::format("{} is not an iobench results file (no \"results\")", which));
  std::vector<const json*> out;
  for (const json& r : doc["results"])
    if (size.empty() || r.value("label", "") == size) out.push_back(&r);
  if (out.empty())
    return fail(size.empty() ? fmt::format("{} has no results", which)
                             : fmt::format("{} has no size '{}'", which, size));
  return out;
}

std::vector<double> values(const json& result, const char* side, const Figure& f) {
  std::vector<double> v;
  for (const json& run : result.value("runs", json::array()))
    if (run.contains(side) && run[side].is_object() && !run.value("partial", false))
      v.push_back(f.of(run[side]));
  return v;
}

FigureComparison compare_figure(const json& b, const json& n, const char* side, const Figure& f,
                                double alpha) {
  FigureComparison c;
  c.label_base = b.value("label", "");
  c.label_next = n.value("label", "");
  c.side = side;
  c.figure = f.name;
  c.lower_is_better = f.lower_is_better;
  c.base = values(b, side, f);
  c.next = values(n, side, f);
  c.median_base = stats::median(c.base);
  c.median_next = stats::median(c.next);
  c.ratio = c.median_base != 0 ? c.median_next / c.median_base : 0;
  const stats::Interval ci = stats::ratio_ci(c.base, c.next);
  c.ci_low = ci.low;
  c.ci_high = ci.high;
  c.p = stats::mann_whitney_p(c.base, c.next);
  const bool tells = c.p < alpha && (ci.low > 1 || ci.high < 1);
  c.verdict = !tells ? "~" : (c.ratio < 1) == f.lower_is_better ? "better" : "worse";
  return c;
}

Result<json> read_json(const std::string& path, const char* which) {
  std::ifstream in(path);
  if (!in) return fail(fmt::format("cannot read {} '{}': {}", which, path, std::strerror(errno)));
  json doc = json::parse(in, nullptr, false);
  if (doc.is_discarded()) return fail(fmt::format("{} '{}' is not JSON", which, path));
  return doc;
}

// "FILE#SIZE" -> {FILE, SIZE}; "FILE" -> {FILE, ""}.
std::pair<std::string, std::string> split_spec(const std::string& spec) {
  const size_t at = spec.rfind('#');
  if (at == std::string::npos) return {spec, ""};
  return {spec.substr(0, at), spec.substr(at + 1)};
}

}  // namespace

Result<std::vector<FigureComparison>> compare_results(const json& base,
                                                      const std::string& base_size,
                                                      const json& next,
                                                      const std::string& next_size, double alpha) {
  if (base_size.empty() != next_size.empty())
    return fail("give a size to both sides (FILE#16K) or to neither");
  auto bs = sizes_of(base, base_size, "BASE");
  if (!bs) return std::unexpected(bs.error());
  auto ns = sizes_of(next, next_size, "NEW");
  if (!ns) return std::unexpected(ns.error());
  std::vector<std::pair<const json*, const json*>> pairs;
  // Named sizes, or two files of one size each (16K against 64K, as they are): that pair;
  // otherwise each size both files have.
  const bool one_each = bs->size() == 1 && ns->size() == 1;
  for (const json* b : *bs)
    for (const json* n : *ns)
      if (!base_size.empty() || one_each || b->value("label", "") == n->value("label", ""))
        pairs.emplace_back(b, n);
  if (pairs.empty()) return fail("BASE and NEW have no size in common (name one: FILE#16K)");
  std::vector<FigureComparison> rows;
  for (auto [b, n] : pairs)
    for (const char* side : {"sender", "receiver"})
      for (const Figure& f : figures()) rows.push_back(compare_figure(*b, *n, side, f, alpha));
  return rows;
}

std::string render_comparison(const CompareCommand& c, const std::vector<FigureComparison>& rows) {
  std::string out = fmt::format(
      "compare {} -> {}: ratio = NEW median / BASE median, 95% bootstrap interval, Mann-Whitney "
      "U p (two-sided); ~ = the runs cannot tell (p >= {} or the interval holds 1)\n",
      c.base, c.next, c.alpha);
  out += fmt::format("{:>14} {:<8} {:<16} {:>5} {:>11} {:>11} {:>7} {:>17} {:>7}  {}\n", "buf",
                     "side", "figure", "runs", "base", "new", "ratio", "95% CI", "p", "verdict");
  for (const FigureComparison& r : rows) {
    const std::string buf = r.label_base == r.label_next
                                ? r.label_base
                                : fmt::format("{} -> {}", r.label_base, r.label_next);
    out += fmt::format("{:>14} {:<8} {:<16} {:>5} {:>11.4f} {:>11.4f} {:>7.3f} {:>17} {:>7.4f}  {}\n",
                       buf, r.side, r.figure, fmt::format("{}/{}", r.base.size(), r.next.size()),
                       r.median_base, r.median_next, r.ratio,
                       fmt::format("[{:.3f}, {:.3f}]", r.ci_low, r.ci_high), r.p, r.verdict);
  }
  return out;
}

json comparison_json(const CompareCommand& c, const std::vector<FigureComparison>& rows) {
  json out = json::array();
  for (const FigureComparison& r : rows)
    out.push_back({{"base_label", r.label_base},
                   {"new_label", r.label_next},
                   {"side", r.side},
                   {"figure", r.figure},
                   {"lower_is_better", r.lower_is_better},
                   {"base_runs", r.base},
                   {"new_runs", r.next},
                   {"base_median", r.median_base},
                   {"new_median", r.median_next},
                   {"ratio", r.ratio},
                   {"ci95", {r.ci_low, r.ci_high}},
                   {"mann_whitney_p", r.p},
                   {"verdict", r.verdict}});
  return {{"base", c.base},
          {"new", c.next},
          {"alpha", c.alpha},
          {"method",
           "ratio of medians NEW/BASE; 95% percentile bootstrap interval (4000 resamples of each "
           "set, fixed seed); two-sided Mann-Whitney U (exact without ties up to 30 runs a "
           "side, else normal with tie correction); partial runs left out"},
          {"rows", out}};
}

int run_compare_command(const CompareCommand& c) {
  const auto [base_file, base_size] = split_spec(c.base);
  const auto [next_file, next_size] = split_spec(c.next);
  auto base = read_json(base_file, "BASE");
  auto next = base ? read_json(next_file, "NEW") : base;
  auto rows = base && next ? compare_results(*base, base_size, *next, next_size, c.alpha)
                           : Result<std::vector<FigureComparison>>(
                                 std::unexpected(base ? next.error() : base.error()));
  if (!rows) {
    print_error(rows.error().message);
    return 2;
  }
  if (c.json_path != "-") fmt::print("{}", render_comparison(c, *rows));
  if (!c.json_path.empty()) {
    const std::string text = comparison_json(c, *rows).dump(2) + "\n";
    if (c.json_path == "-") {
      fmt::print("{}", text);
    } else if (std::ofstream f(c.json_path); !(f << text)) {
      print_error(fmt::format("cannot write --json '{}'", c.json_path));
      return 1;
    }
  }
  return 0;
}

}  // namespace iobench
