"""The scripts' Python: a module a script needs, from this interpreter or from the
distribution's, which scripts/setup provisions (python3-matplotlib, python3-pytest). A `python3`
on PATH that is not the distribution's (pyenv, conda, a vendor Python) lacks them: the script
then runs itself again under /usr/bin/python3, or stops with one line naming the fix."""
import importlib
import os
import sys

SYSTEM_PYTHON = "/usr/bin/python3"


def module(name, prog, package=None):
    try:
        return importlib.import_module(name)
    except ImportError:
        pass
    here = os.path.realpath(sys.executable)
    if (here != os.path.realpath(SYSTEM_PYTHON) and os.access(SYSTEM_PYTHON, os.X_OK)
            and not os.environ.get("IOBENCH_PY_REEXEC")):
        os.environ["IOBENCH_PY_REEXEC"] = "1"
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(sys.argv[0]), *sys.argv[1:]])
    sys.exit(f"{prog}: error: Python module '{name}' is missing for {sys.executable} "
             f"(scripts/setup installs {package or 'python3-' + name} for {SYSTEM_PYTHON}; "
             f"or: {sys.executable} -m pip install {name})")


def pyplot(prog):
    """matplotlib.pyplot drawing to files (the Agg backend), or `module`'s re-run / one line."""
    module("matplotlib", prog).use("Agg")
    return module("matplotlib.pyplot", prog, "python3-matplotlib")
