"""The Valkey pull requests of patches/upstream/NAME/: each a folder with its commit (NAME.patch,
`git format-patch` form), its description (PR.md) and pr.json (its title, the PRs it builds on,
its own test); and a Valkey 9.1.2 source tree with some of them applied (scripts/valkey-pr).

A PR's commit holds its change and its test; `split_patch` separates the two (a file under
src/unit/ or tests/ is a test), so a check can apply the test alone and see it fail."""
import fnmatch
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

from iobench_tools.lib.kernel.iobenchlib import ROOT, parse_size

BASE = "9.1.2"
PRS = os.path.join(ROOT, "patches", "upstream")
TEST_DIRS = ("src/unit/", "tests/")
# Valkey's CI formats *.c, *.h, *.cpp and *.hpp with clang-format 18; Debian bookworm has 19
# (and 14, too old for its .clang-format), whose output matches on these files.
FORMATTED = re.compile(r"\.(c|h|cpp|hpp)$")


class PrError(Exception):
    """Bad input about a PR (missing, malformed, a patch that does not apply): one line."""


def names():
    """Every PR folder, in its name's order (they are numbered in the order they land)."""
    if not os.path.isdir(PRS):
        return []
    return sorted(d for d in os.listdir(PRS)
                  if os.path.isfile(os.path.join(PRS, d, "pr.json")))


def load(name):
    """A PR's pr.json, with its folder, commit and description checked to be there."""
    folder = os.path.join(PRS, name)
    meta = os.path.join(folder, "pr.json")
    if not os.path.isfile(meta):
        raise PrError(f"no PR '{name}' (expected one of: {', '.join(names()) or 'none'})")
    try:
        with open(meta) as f:
            pr = json.load(f)
    except ValueError as e:
        raise PrError(f"{os.path.relpath(meta, ROOT)}: not JSON ({e})") from None
    for key in ("title", "needs", "test"):
        if key not in pr:
            raise PrError(f"{os.path.relpath(meta, ROOT)}: no '{key}'")
    pr["name"] = name
    pr["patch"] = os.path.join(folder, f"{name}.patch")
    pr["description"] = os.path.join(folder, "PR.md")
    for path in (pr["patch"], pr["description"]):
        if not os.path.isfile(path):
            raise PrError(f"PR '{name}' has no {os.path.relpath(path, ROOT)}")
    for need in pr["needs"]:
        if need not in names():
            raise PrError(f"PR '{name}' needs '{need}', which is not a PR here")
    return pr


def chain(name):
    """The PRs `name` builds on, in the order they apply, then `name` itself."""
    out = []

    def visit(n, seen):
        if n in seen:
            raise PrError(f"PR '{n}' needs itself (through {' -> '.join(seen)})")
        for need in load(n)["needs"]:
            visit(need, seen + [n])
        if n not in out:
            out.append(n)
    visit(name, [])
    return out


def split_patch(text, with_test=()):
    """(change, test): the commit's file diffs that are not tests, and those that are; each a
    patch `patch -p1` applies (the commit message stays with the change). `with_test`: files of
    the change that go with the test, as a constant's definition the test names (pr.json's
    test.with_test: the test alone must compile, and fail by what the change does)."""
    parts = re.split(r"(?m)^(?=diff --git )", text)
    head, files = parts[0], parts[1:]
    change, test = [head], []
    for diff in files:
        path = re.match(r"diff --git a/(\S+)", diff).group(1)
        (test if path.startswith(TEST_DIRS) or path in with_test else change).append(diff)
    return "".join(change), "".join(test)


def changed_files(text):
    """The paths a patch writes (the b/ side of each file diff)."""
    return re.findall(r"(?m)^\+\+\+ b/(\S+)", text)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@functools.lru_cache(maxsize=1)
def fetch_base():
    """The pinned 9.1.2 tarball (scripts/build-valkey-source --fetch): its path, or PrError."""
    p = subprocess.run([os.path.join(ROOT, "scripts", "build-valkey-source"), "--fetch", BASE],
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0 or not p.stdout.strip():
        said = (p.stderr.strip() or "no output").splitlines()[-1]
        raise PrError(f"Valkey {BASE}'s source is not available: {said}")
    return p.stdout.strip().splitlines()[-1]


def extract(tarball, dest):
    """Valkey's tree from `tarball` into `dest` (its top folder stripped)."""
    os.makedirs(dest, exist_ok=True)
    subprocess.run(["tar", "-C", dest, "--strip-components=1", "-xf", tarball], check=True,
                   capture_output=True, timeout=300)


def apply(tree, text, what):
    """Applies a patch's text to `tree` with no fuzz; PrError naming `what` when it does not."""
    p = subprocess.run(["patch", "-d", tree, "-p1", "--forward", "--batch", "--fuzz=0"],
                       input=text, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        said = next((line for line in p.stdout.splitlines()
                     if re.search(r"fail|reject|malformed|garbage|only garbage", line, re.I)),
                    p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "patch failed")
        raise PrError(f"{what} does not apply to Valkey {BASE} with --fuzz=0: {said}")


def patched_tree(tree, patches):
    """A pristine 9.1.2 tree at `tree` with `patches` applied in order, each (its text, what to
    call it when it does not apply)."""
    extract(fetch_base(), tree)
    for text, what in patches:
        apply(tree, text, what)


def commits(paths):
    """Commit files as patched_tree() takes them: (text, the file's path in the checkout)."""
    out = []
    for path in paths:
        with open(path) as f:
            out.append((f.read(), os.path.relpath(path, ROOT)))
    return out


def prepare(tree, name, with_change=True):
    """A pristine 9.1.2 tree at `tree` with `name`'s chain applied; `with_change` False applies
    the PRs it needs and only `name`'s test (to see the test fail without the change)."""
    patches = commits(load(n)["patch"] for n in chain(name))
    if not with_change:
        with_test = load(name)["test"].get("with_test", ())
        patches[-1] = (split_patch(patches[-1][0], with_test)[1], f"{name}'s test")
    patched_tree(tree, patches)


def copy_suite(tree, dest):
    """A tree's Tcl suite (tests/, utils/, runtest) into `dest`, which must not hold one yet."""
    os.makedirs(dest, exist_ok=True)
    for part in ("tests", "utils"):
        shutil.copytree(os.path.join(tree, part), os.path.join(dest, part), symlinks=True)
    shutil.copy2(os.path.join(tree, "runtest"), dest)


def blocks_of(text, cases):
    """The top-level blocks of a Tcl unit's `text` (from a line at column 0 to the next `}` at
    column 0) that hold the `test "CASE"` of each of `cases`, in the unit's order: a unit of only
    those tests, to run them many times in a row (runtest's --only skips the other tests but
    still runs the code between them, which here stops a server and waits for it)."""
    lines = text.splitlines(keepends=True)
    spans, start = [], None
    for i, line in enumerate(lines):
        if start is None and line[:1] not in ("", " ", "\t", "\n", "#", "}"):
            start = i
        elif start is not None and line.rstrip("\n") == "}":
            spans.append((start, i + 1))
            start = None
    picked = []
    for case in cases:
        found = [s for s in spans if any(f'test "{case}"' in line for line in lines[s[0]:s[1]])]
        if not found:
            raise PrError(f"no top-level block of the unit holds the test '{case}'")
        if found[0] not in picked:
            picked.append(found[0])
    return "\n".join("".join(lines[a:b]) for a, b in sorted(picked))


def format_problems(tree, paths, clang_format):
    """The files among `paths` that Valkey's .clang-format would change (its ignore list
    honoured): a list of paths, empty when clean."""
    ignore = os.path.join(tree, "src", ".clang-format-ignore")
    ignored = []
    if os.path.isfile(ignore):
        with open(ignore) as f:
            ignored = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    bad = []
    for path in paths:
        if not FORMATTED.search(path) or not os.path.isfile(os.path.join(tree, path)):
            continue
        rel_src = os.path.relpath(path, "src")
        if any(fnmatch.fnmatch(rel_src, pattern) for pattern in ignored):
            continue
        p = subprocess.run([clang_format, "--dry-run", "-Werror", path], cwd=tree,
                           capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            bad.append(path)
    return bad


BUILDS = os.path.join(ROOT, "build", "valkey", "9.1")
SERIES = "series"
SERIES_ASAN = "series-asan"  # the whole series built with SANITIZER=address


# The experiment harness's own knobs, never in a PR: NAME@SIZE is build NAME with its full sync
# chunk (the REPL_CHUNK_SIZE a PR defines) rewritten to SIZE, to find the size the PR should set;
# NAME~SIZE is one measurement binary of NAME for every size (NAME~env), its chunk read once at
# start from IOBENCH_REPL_CHUNK=SIZE, so two sizes run the same code at the same addresses
# (Mytkowicz et al.: two builds differ in layout as well as in the constant).
CHUNK_DEFINE = re.compile(r"^#define REPL_CHUNK_SIZE .*$", re.M)
RUNTIME = "~"
RUNTIME_BINARY = "env"
CHUNK_ENV = "IOBENCH_REPL_CHUNK"
CHUNK_RANGE = (1024, 16 << 20)
# Read before main() (a constructor), so the fork child inherits it and nothing reads it again.
RUNTIME_CHUNK_C = r"""
/* iobench's measurement build (not part of any PR): REPL_CHUNK_SIZE read once at start from
 * IOBENCH_REPL_CHUNK, so one binary runs every chunk size. */
size_t iobench_repl_chunk = 16 * 1024;
__attribute__((constructor)) static void iobenchReadReplChunk(void) {
    const char *v = getenv("IOBENCH_REPL_CHUNK");
    char *end = NULL;
    unsigned long long n;
    if (v == NULL) return;
    errno = 0;
    n = strtoull(v, &end, 10);
    if (errno || end == v || *end != '\0' || n < %d || n > %d) {
        fprintf(stderr, "invalid IOBENCH_REPL_CHUNK '%%s': expected bytes %d..%d\n", v);
        exit(1);
    }
    iobench_repl_chunk = (size_t)n;
}
""" % (CHUNK_RANGE * 2)


def build_names():
    """What can be built: stock 9.1.2, each PR (with the PRs it needs), the whole series, and
    the series under AddressSanitizer (and NAME@SIZE, a chunk variant of any but the last)."""
    return ["stock", *names(), SERIES, SERIES_ASAN]


def split_variant(build):
    """(the build, its chunk in bytes or None) of a build name: 'series@256k' -> ('series',
    262144), 'series~64k' -> ('series', 65536), 'series~64k#2' (its A/A twin: the same binary
    at the same size) -> ('series', 65536), 'series~env' -> ('series', None). PrError when the
    size is not one."""
    build, hash_, twin = build.partition("#")
    if hash_ and (RUNTIME not in build or not twin.isdigit()):
        raise PrError(f"invalid chunk variant '{build}#{twin}': expected NAME~SIZE#K, K a number")
    at = "@" if "@" in build else RUNTIME
    name, sep, size = build.partition(at)
    if not sep:
        return name, None
    if at == RUNTIME and size == RUNTIME_BINARY and name != SERIES_ASAN:
        return name, None
    try:
        chunk = parse_size(size)
    except ValueError:
        chunk = 0
    if not CHUNK_RANGE[0] <= chunk <= CHUNK_RANGE[1] or name == SERIES_ASAN:
        raise PrError(f"invalid chunk variant '{build}': expected NAME@SIZE or NAME~SIZE, "
                      f"SIZE 1k..16m, NAME not {SERIES_ASAN}")
    return name, chunk


def runtime_binary(build):
    """The one binary a NAME~SIZE build runs (NAME~env), or None for any other build."""
    name, sep, _ = build.partition("#")[0].partition(RUNTIME)
    return f"{name}{RUNTIME}{RUNTIME_BINARY}" if sep and "@" not in build else None


def env_of(build):
    """The environment a build's server runs with: NAME~SIZE's chunk, else nothing."""
    chunk = split_variant(build)[1]
    return {CHUNK_ENV: str(chunk)} if runtime_binary(build) and chunk else None


def known_build(build):
    """Whether `build` names a build (a chunk variant included)."""
    try:
        return split_variant(build)[0] in build_names()
    except PrError:
        return False


def patches_of(build):
    """The commits a build applies, in order."""
    build = split_variant(build)[0]
    if build == "stock":
        return []
    order = names() if build in (SERIES, SERIES_ASAN) else chain(build)
    return [load(n)["patch"] for n in order]


def _rewrite_chunk(tree, define, needs):
    """Replaces the REPL_CHUNK_SIZE a PR defines in `tree`'s server.h by `define`; PrError
    (`needs`) when the tree defines none."""
    path = os.path.join(tree, "src", "server.h")
    with open(path) as f:
        text = f.read()
    if not CHUNK_DEFINE.search(text):
        raise PrError(f"{needs} needs a build whose PRs define REPL_CHUNK_SIZE")
    with open(path, "w") as f:
        f.write(CHUNK_DEFINE.sub(define, text, count=1))


def set_chunk(tree, chunk):
    """Rewrites the REPL_CHUNK_SIZE a PR defines in `tree` to `chunk` bytes (the harness's chunk
    variants); PrError when the tree defines none."""
    _rewrite_chunk(tree, f"#define REPL_CHUNK_SIZE {chunk}", "a chunk variant")


def set_runtime_chunk(tree):
    """Makes the REPL_CHUNK_SIZE a PR defines in `tree` a variable read at start
    (RUNTIME_CHUNK_C, defined in server.c); PrError when the tree defines none."""
    _rewrite_chunk(tree, "extern size_t iobench_repl_chunk;\n"
                         "#define REPL_CHUNK_SIZE iobench_repl_chunk", "a NAME~SIZE build")
    with open(os.path.join(tree, "src", "server.c"), "a") as f:
        f.write(RUNTIME_CHUNK_C)


def optimization_flags():
    """OPTIMIZATION=... when IOBENCH_VALKEY_OPTIMIZATION is set (CI's -O0: half the CPU of
    -O2; a test's build, never a measurement's), else nothing."""
    opt = os.environ.get("IOBENCH_VALKEY_OPTIMIZATION")
    return [f"OPTIMIZATION={opt}"] if opt else []


def malloc_flags():
    """MALLOC=... when IOBENCH_VALKEY_MALLOC is set (CI's libc: jemalloc's own build is 102 of a
    9.1.2 build's 155 CPU-s at -O0; a test's build, never a measurement's, which keeps Valkey's
    jemalloc as it ships), else nothing."""
    malloc = os.environ.get("IOBENCH_VALKEY_MALLOC")
    if malloc and malloc not in ("libc", "jemalloc"):
        raise PrError(f"invalid IOBENCH_VALKEY_MALLOC '{malloc}': expected libc or jemalloc")
    return [f"MALLOC={malloc}"] if malloc else []


def make_flags(build):
    """The make variables of a build: TLS always; AddressSanitizer for series-asan; CI's
    optimization level and allocator (optimization_flags, malloc_flags). They are part of the
    build's cache key."""
    return ["BUILD_TLS=yes", *(["SANITIZER=address"] if build == SERIES_ASAN else []),
            *optimization_flags(), *malloc_flags()]


def build(name, timeout=3600, log=None, unit_tests=True):
    """Valkey 9.1.2 built with TLS (Valkey's own allocator, as it ships; series-asan with
    AddressSanitizer), stock or with a PR's chain or the whole series applied: the folder holding
    its valkey-server, valkey-cli, valkey-benchmark, valkey-unit-gtests (its GoogleTest suite)
    and its own Tcl suite (tests/, runtest, utils/), cached by the hash of what went into it
    under build/valkey-src/ and linked as build/valkey/9.1/NAME. unit_tests=False (a study,
    which runs the servers only) leaves out the GoogleTest suite, about half a build's CPU
    (two -O0 builds with it took 632 CPU-s in a fresh clone's CI); an existing tree is reused
    either way, the one without the suite first, so a study's tree does not change under it.
    PrError says why one cannot be had (the source, a patch, the build)."""
    name = runtime_binary(name) or name
    base, chunk = split_variant(name)
    if base not in build_names():
        raise PrError(f"no build '{name}' (expected one of: {', '.join(build_names())}, "
                      f"or NAME@SIZE)")
    patches = patches_of(name)
    full, lean = (tree_dir(name, patches, suite) for suite in (True, False))
    have = [d for d in ((full,) if unit_tests else (lean, full))
            if os.access(os.path.join(d, "valkey-server"), os.X_OK)]
    dest = have[0] if have else (full if unit_tests else lean)
    if not have:
        _build_into(dest, name, patches, timeout, log, unit_tests)
    link = os.path.join(BUILDS, name)
    os.makedirs(BUILDS, exist_ok=True)
    tmp_link = link + ".new"
    if os.path.lexists(tmp_link):
        os.remove(tmp_link)
    os.symlink(os.path.relpath(dest, BUILDS), tmp_link)
    os.replace(tmp_link, link)
    return link


def tree_dir(name, patches, unit_tests):
    """build/valkey-src/9.1.2-NAME-HASH, HASH of the flags, the chunk, the patches and whether
    the GoogleTest suite is in it (the tree of a build without it is another tree)."""
    chunk = split_variant(name)[1]
    suite = " valkey-unit-gtests" if unit_tests else ""
    h = hashlib.sha256(f"{BASE} {' '.join(make_flags(name))}{suite}".encode())
    if chunk:
        h.update(f" REPL_CHUNK_SIZE={chunk}".encode())
    if runtime_binary(name):
        h.update(f" REPL_CHUNK_SIZE={RUNTIME_CHUNK_C}".encode())
    for p in patches:
        with open(p, "rb") as f:
            h.update(f.read())
    return os.path.join(ROOT, "build", "valkey-src", f"{BASE}-{name}-{h.hexdigest()[:12]}")


def _make(tree, args, what, name, timeout, log):
    """`make` in `tree` with the build's flags, its output to `log`; PrError naming `what`."""
    out = open(log, "a") if log else subprocess.DEVNULL
    try:
        p = subprocess.run(["make", f"-j{os.cpu_count() or 1}", *make_flags(name), *args],
                           cwd=tree, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise PrError(f"{what} took longer than {timeout} s") from None
    finally:
        if log:
            out.close()
    if p.returncode != 0:
        raise PrError(f"{what} failed (make exit {p.returncode})")


def _build_into(dest, name, patches, timeout, log, unit_tests=True):
    work = tempfile.mkdtemp(prefix="valkey-build-")
    try:
        tree = os.path.join(work, "tree")
        patched_tree(tree, commits(patches))
        chunk = split_variant(name)[1]
        if chunk:
            set_chunk(tree, chunk)
        if runtime_binary(name):
            set_runtime_chunk(tree)
        _make(tree, [], f"the {name} build of Valkey {BASE}", name, timeout, log)
        binaries = ["valkey-server", "valkey-cli", "valkey-benchmark"]
        if unit_tests:
            # Valkey's GoogleTest suite (src/unit), built against this tree.
            _make(tree, ["-C", "src", "valkey-unit-gtests"],
                  f"the {name} build of Valkey {BASE}'s unit tests (libgtest-dev, libgmock-dev?)",
                  name, timeout, log)
            binaries.append(os.path.join("unit", "valkey-unit-gtests"))
        staged = dest + ".new"
        shutil.rmtree(staged, ignore_errors=True)
        os.makedirs(staged)
        for binary in binaries:
            shutil.copy2(os.path.join(tree, "src", binary), staged)
        copy_suite(tree, staged)
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(staged, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def gtest_cases(text):
    """Each test case's verdict in a GoogleTest run's output: {name: 'ok' | 'failed'}."""
    cases = {}
    for line in text.splitlines():
        m = re.match(r"\[\s+(OK|FAILED)\s+\] (\S+\.\S+) \(", line)
        if m:
            cases[m.group(2)] = m.group(1).lower()
    return cases


def run_gtests(build_dir, timeout=1800):
    """A build's GoogleTest suite (valkey-unit-gtests), run in a temporary directory of its own:
    its status ('passed', 'failed', 'timeout'), seconds, the cases passed and failed."""
    binary = os.path.join(build_dir, "valkey-unit-gtests")
    cwd = tempfile.mkdtemp(prefix="valkey-gtests-")
    t0 = time.monotonic()
    try:
        p = subprocess.run([binary], cwd=cwd, capture_output=True, text=True, errors="replace",
                           timeout=timeout)
        status = "passed" if p.returncode == 0 else "failed"
        text = p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        status, text = "timeout", (e.stdout or b"").decode(errors="replace")
    finally:
        shutil.rmtree(cwd, ignore_errors=True)
    cases = gtest_cases(text)
    return {"status": status, "seconds": round(time.monotonic() - t0, 1),
            "passed": sum(v == "ok" for v in cases.values()),
            "failed": sorted(k for k, v in cases.items() if v == "failed"),
            "tail": [] if status == "passed" else text.splitlines()[-15:]}
