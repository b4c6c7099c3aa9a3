// iobench-micro: Google Benchmark microbenchmarks of what one buffer costs.
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
