"""One module per command a user runs (scripts/<command>, or iobench-<command> where the package
is installed): each parses its own options with argparse and has a `main(argv=None)`. The list
of commands is `[project.scripts]` in pyproject.toml."""
