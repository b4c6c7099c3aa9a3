// `iobench compare BASE NEW`: two sets of runs (two results files, or two sizes of one) set
// side by side per figure — the ratio of medians, its bootstrap confidence interval and the
// Mann-Whitney U test — and marked `~` where the runs cannot tell them apart.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/options.h"
#include "util/result.h"

namespace iobench {

struct FigureComparison {
  std::string label_base, label_next;  // the sizes compared
  std::string side;                    // sender, receiver
  std::string figure;                  // cpu_s_per_gib, throughput_gbps, wall_s
  bool lower_is_better = true;
  std::vector<double> base, next;  // one value per run
  double median_base = 0, median_next = 0, ratio = 0, ci_low = 0, ci_high = 0, p = 1;
  // "~": the runs cannot tell (p >= alpha or the interval holds 1); else "better" or "worse".
  std::string verdict;
};

// Every figure of every matched size and side. Errors name the file or size at fault.
Result<std::vector<FigureComparison>> compare_results(const nlohmann::json& base,
                                                      const std::string& base_size,
                                                      const nlohmann::json& next,
                                                      const std::string& next_size, double alpha);

std::string render_comparison(const CompareCommand& c, const std::vector<FigureComparison>& rows);
nlohmann::json comparison_json(const CompareCommand& c, const std::vector<FigureComparison>& rows);

int run_compare_command(const CompareCommand& c);

}  // namespace iobench
