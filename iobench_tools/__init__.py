"""iobench's Python half: the measurement commands (`commands/`, one module each with a `main()`,
launched as scripts/<command> or installed as iobench-<command>) over the libraries they share
(`lib/`), which read iobench's JSON only and know nothing of its C++ internals."""
