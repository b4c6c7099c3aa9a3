"""What the commands share, in five packages, each importing only from itself and the ones
before it (tests/scripts/test_python_package.py):

- `kernel`: how a scenario runs iobench: the binary and sizes, the one argv builder (`runs`), the
  one reader of its JSON (`iobenchjson`), the experiment kernel (`experiment`: cells x rounds,
  retries, resume), the shared axes, result folders by kind, CPU in a cgroup;
- `judging`: deciding between cells: statistics, same work, the cost model, carry-over;
- `sweeps`: sweeps and fan-out scenarios, run and read: rows, statements, the noise floor,
  repeatability across sweeps;
- `valkey`: real Valkey/Redis: syncs, their probes and reports, the pull requests, the builds,
  Valkey's own tests, the upstream evidence;
- `fleet`: other hosts: a fleet's pairs, the two-host sweep's remote server, the emulated link.

A library never imports a command."""
