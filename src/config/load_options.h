// `iobench load`: an open-loop RESP load on a Valkey or Redis server (commands/resp_load.cc).
#pragma once

#include <cstdint>
#include <string>

#include "util/fields.h"

namespace iobench {

struct LoadCommand {
  std::string connect;       // HOST:PORT
  double rate = 0;           // requests a second, over every connection together
  uint32_t conns = 4;        // connections; request k goes on connection k mod conns
  double duration_s = 10;    // requests are scheduled over this long
  std::string command = "get";
  uint32_t value_size = 3;   // SET's value bytes (valkey-benchmark's -d)
  uint32_t keyspace = 100000;  // SET's keys (valkey-benchmark's -r)
  double slice_s = 0.1;      // the histograms' time slices, by intended send time
  double drain_s = 5;        // after the last send, how long replies are waited for
  // A reply (declared or buffered) larger than this is refused: a server cannot make the load
  // hold what it says it will send.
  uint64_t max_reply = 1 << 20;
  std::string json_path;     // "-": stdout
  bool quiet = false;
};

template <typename Self, typename Visit>
  requires DescribesAs<Self, LoadCommand>
void describe(Self& c, Visit&& visit) {
  visit(Field{.name = "connect",
              .flag = "--connect",
              .help = "The Valkey or Redis server, HOST:PORT",
              .short_flag = "-c",
              .required = true,
              .value_name = "HOST:PORT"},
        c.connect);
  visit(Field{.name = "rate",
              .flag = "--rate",
              .help = "Requests a second over all connections, each sent at its intended time "
                      "whether or not earlier replies came (open loop)",
              .real_min = 0,
              .real_max = 1e7,
              .above_min = true,
              .required = true,
              .value_name = "N"},
        c.rate);
  visit(Field{.name = "conns",
              .flag = "--conns",
              .help = "Connections (default 4)",
              .min = 1,
              .max = 1024},
        c.conns);
  visit(Field{.name = "duration_s",
              .flag = "--duration",
              .help = "Schedule requests over this long (default 10s)",
              .short_flag = "-d",
              .real_min = 0,
              .real_max = 86400,
              .above_min = true,
              .duration = true},
        c.duration_s);
  visit(Field{.name = "command",
              .flag = "--command",
              .help = "get (default: GET of one key, as valkey-benchmark -t get) or set (SET of "
                      "--keyspace keys, --value-size bytes)",
              .choices = "get,set",
              .value_name = "get|set"},
        c.command);
  visit(Field{.name = "value_size",
              .flag = "--value-size",
              .help = "SET's value bytes (default 3)",
              .min = 1,
              .max = 1 << 20},
        c.value_size);
  visit(Field{.name = "max_reply",
              .flag = "--max-reply",
              .help = "Largest reply accepted, declared or received (default 1M: a GET of a "
                      "--value-size key is far less); a larger one ends the run with an error",
              .min = 64,
              .max = int64_t{1} << 32,
              .size = true},
        c.max_reply);
  visit(Field{.name = "keyspace",
              .flag = "--keyspace",
              .help = "SET's distinct keys (default 100000)",
              .min = 1,
              .max = 1u << 30},
        c.keyspace);
  visit(Field{.name = "slice_s",
              .flag = "--slice",
              .help = "Histogram slices of this long, by intended send time, each stamped with "
                      "its wall-clock start (default 100ms)",
              .real_min = 0.001,
              .real_max = 3600,
              .duration = true},
        c.slice_s);
  visit(Field{.name = "drain_s",
              .flag = "--drain",
              .help = "After the last send, wait this long for replies; any still missing are "
                      "reported unanswered (default 5s)",
              .real_min = 0,
              .real_max = 3600,
              .duration = true},
        c.drain_s);
  visit(Field{.name = "json",
              .flag = "--json",
              .help = "Write the histograms and slices as JSON (-: stdout)",
              .value_name = "FILE"},
        c.json_path);
  visit(Field{.name = "quiet", .flag = "--quiet", .help = "No summary lines", .short_flag = "-q"},
        c.quiet);
}

}  // namespace iobench
