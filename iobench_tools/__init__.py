"""iobench's Python half: the measurement commands (`commands/`, one module each with a `main()`,
launched as scripts/<command> or installed as iobench-<command>) over the libraries they share
(`lib/`), which read iobench's JSON only and know nothing of its C++ internals."""

import os as _os
import sys as _sys


def _without_user_site():
    """PEP 370's user site (~/.local/lib/pythonX.Y/site-packages) off, for this process and its
    children: a NumPy 2 there (`pip install --user`) breaks the distribution's matplotlib, and a
    user's packages are no input of a measurement. A process that started with it on runs itself
    again with -s (before anything from it was imported: the launchers import this first)."""
    _os.environ["PYTHONNOUSERSITE"] = "1"
    if _sys.flags.no_user_site:
        return
    import site
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user and user in _sys.path and _os.environ.get("IOBENCH_PY_NO_USER_SITE") != "1":
        _os.environ["IOBENCH_PY_NO_USER_SITE"] = "1"  # once: never a loop
        _os.execv(_sys.executable, [_sys.executable, "-s", *_sys.orig_argv[1:]])


_without_user_site()
