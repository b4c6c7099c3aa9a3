"""A user's own Python packages cannot break iobench's Python (issue #77): a NumPy that fails to
import, planted in the user site (PEP 370: ~/.local/lib/pythonX.Y/site-packages, where `pip
install --user` puts a NumPy 2 beside Debian's matplotlib), breaks a plain /usr/bin/python3's
matplotlib, and neither a script (scripts/sweep, scripts/plot), setup's check nor pytest notice
it: they run with the user site off."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))
PYTHON = "/usr/bin/python3"


@pytest.fixture
def broken_home(tmp_path):
    """A HOME whose user site holds a NumPy that raises on import; the environment that sees
    it (the user site on: PYTHONNOUSERSITE, which scripts/test sets, taken away)."""
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONNOUSERSITE", "IOBENCH_PY_NO_USER_SITE", "IOBENCH_PY_REEXEC")}
    env["HOME"] = str(home)
    user_site = subprocess.run([PYTHON, "-c", "import site; print(site.getusersitepackages())"],
                               env=env, capture_output=True, text=True, check=True).stdout.strip()
    numpy = Path(user_site) / "numpy"
    numpy.mkdir(parents=True)
    (numpy / "__init__.py").write_text('raise ImportError("planted: a broken NumPy in the user '
                                       'site")\n')
    return env


def test_the_planted_numpy_breaks_a_plain_python(broken_home):
    # The plant works: without -s, Debian's matplotlib imports it and fails.
    p = subprocess.run([PYTHON, "-c", "import matplotlib.pyplot"], env=broken_home,
                       capture_output=True, text=True)
    if p.returncode == 0 and "planted" not in p.stderr:
        pytest.skip("matplotlib here does not import numpy at once")
    assert "planted: a broken NumPy" in p.stderr, p.stderr


def test_scripts_setup_and_pytest_run_with_the_user_site_off(broken_home, tmp_path):
    p = subprocess.run([str(SCRIPTS / "sweep"), "site", "--results", str(tmp_path), "--iobench",
                        BIN, "--proto", "tcp", "--bufs", "16k", "--bytes", "128k"],
                       env=broken_home, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([str(SCRIPTS / "plot"), str(tmp_path / "site")], env=broken_home,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "site" / "plots" / "cpu_per_gib.png").is_file()
    p = subprocess.run([str(SCRIPTS / "setup"), "--check-python"], env=broken_home,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    # pytest as scripts/test and ctest run it (-s): a test importing matplotlib passes.
    test = tmp_path / "test_imports.py"
    test.write_text("import matplotlib.pyplot\n\ndef test_ok():\n    assert matplotlib.pyplot\n")
    p = subprocess.run([PYTHON, "-s", "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
                       env=broken_home, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


def test_setups_check_names_the_import_error_it_met(tmp_path):
    # A Python that truly lacks a module: the check's line shows what the import said.
    fake = tmp_path / "sitecustomize.py"
    fake.write_text("import sys\nsys.modules['matplotlib'] = None\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    p = subprocess.run([str(SCRIPTS / "setup"), "--check-python"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 1
    assert "cannot import matplotlib and pytest" in p.stderr and "ModuleNotFoundError" in p.stderr, \
        p.stderr


def foreign_python3():
    """The caller's PATH (scripts/test puts the distribution's python3 first and keeps the one
    it was given in IOBENCH_CALLER_PATH) and the python3 it finds there, when that one is not the
    distribution's (pyenv's, conda's, a vendor's), else None."""
    path = os.environ.get("IOBENCH_CALLER_PATH", os.environ["PATH"])
    found = shutil.which("python3", path=path)
    if found and os.path.realpath(found) != os.path.realpath(PYTHON):
        return path, found
    return path, None


@pytest.mark.skipif(foreign_python3()[1] is None,
                    reason="the PATH's python3 is the distribution's: no other one to start under")
def test_a_script_started_by_another_python3_runs_itself_under_the_distributions(tmp_path):
    # The scripts start as `env python3`. One without matplotlib (pyenv's here) hands the run to
    # /usr/bin/python3, which has it: plot gets past its import to its own error on an empty
    # folder; not the missing module's, as it says when it cannot hand over.
    path, found = foreign_python3()
    env = {k: v for k, v in os.environ.items() if k != "IOBENCH_PY_REEXEC"}
    env["PATH"] = path
    lacks = subprocess.run([found, "-c", "import matplotlib"], env=env, capture_output=True)
    if lacks.returncode == 0:
        pytest.skip(f"{found} has matplotlib: nothing to hand over")
    p = subprocess.run([str(SCRIPTS / "plot"), str(tmp_path)], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 1 and "is not a sweep" in p.stderr, p.stderr
    p = subprocess.run([str(SCRIPTS / "plot"), str(tmp_path)], env=dict(env, IOBENCH_PY_REEXEC="1"),
                       capture_output=True, text=True, timeout=60)
    # Not handed over, the same run stops at the import: the case above was the hand-over's.
    assert "Python module 'matplotlib' is missing for" in p.stderr, p.stderr
