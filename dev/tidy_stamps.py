"""Which sources dev/tidy must check: a source whose inputs are byte for byte those of an earlier
clean check is clean again (clang-tidy is a pure function of them), so only the others are run.

A source's key is a SHA-256 over everything clang-tidy reads or is: the clang-tidy and libc++
package versions (libc++'s headers are what it parses the standard library from), .clang-tidy,
the compile command (paths made relative to the checkout; the commit's IOBENCH_GIT_COMMIT
string left out, as it changes every commit and no check reads it; -Werror left out, as
.clang-tidy already fails on every warning it shows, so a source is clean under both or neither;
scripts/setup's build has no -Werror, scripts/test's has) and the contents of the
source and of every header the build's depfile lists for it (ninja -t deps), system ones too,
or, where the object was never built, the compiler's -M lists (the same paths).
The keys of clean sources are kept in dev/tidy-clean.txt, committed beside the code, so a fresh
clone checks only what changed since the last clean run (IOBENCH_TIDY_ALL=1 checks everything).

  tidy_stamps.py pending BUILD FILE...   prints the files without a clean key
  tidy_stamps.py record BUILD FILE...    records every FILE's key as clean (after a clean run)"""
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAMPS = os.path.join(ROOT, "dev", "tidy-clean.txt")
TOOLS = ("clang-tidy-16", "libc++-16-dev")
_content = {}


def digest_of(path):
    if path not in _content:
        with open(path, "rb") as f:
            _content[path] = hashlib.sha256(f.read()).hexdigest()
    return _content[path]


def tool_versions():
    p = subprocess.run(["dpkg-query", "-W", *TOOLS], capture_output=True, text=True)
    return p.stdout + p.stderr


def commands(build):
    """source path (relative) -> (compile command without the commit string, object path, the
    compile_commands entry)."""
    out = {}
    for entry in json.load(open(os.path.join(build, "compile_commands.json"))):
        args = shlex.split(entry["command"])
        obj = args[args.index("-o") + 1]
        kept = [a for a in args if not a.startswith("-DIOBENCH_GIT_COMMIT=") and a != "-Werror"]
        command = " ".join(kept).replace(ROOT + "/", "").replace(ROOT, ".")
        out[os.path.relpath(entry["file"], ROOT)] = (command, obj, entry)
    return out


def dependencies(build):
    """object path -> the paths its depfile lists, for every object built (one ninja call)."""
    p = subprocess.run(["ninja", "-C", build, "-t", "deps"], capture_output=True, text=True)
    out, obj = {}, None
    for line in p.stdout.splitlines():
        if line.startswith("    ") and obj is not None:
            out[obj].append(line.strip())
        elif line and not line.startswith(" "):
            obj = line.split(": #deps", 1)[0]
            out[obj] = []
    return out if p.returncode == 0 else {}


def preprocessor_dependencies(entry):
    """The paths the compiler reads for one compile_commands entry, from its -M output (what
    the depfile of a build of that object would list): for a tree configured and never built,
    as dev/tidy's per-file tree is. None when the compiler fails."""
    args = shlex.split(entry["command"])
    i = args.index("-o")
    args = [a for a in args[:i] + args[i + 2:] if a != "-c"]  # CMake's entries hold no -M flags
    p = subprocess.run(args + ["-M", "-MT", "x"], cwd=entry["directory"], capture_output=True,
                       text=True)
    if p.returncode != 0:
        return None
    names = p.stdout.replace("\\\n", " ").split()[1:]  # after "x:"
    return [os.path.normpath(os.path.join(entry["directory"], n)) for n in names]


def keys(build, files):
    """file -> key, or None where the build holds no dependency list for it (not built yet)."""
    tool = os.environ.get("IOBENCH_CLANG_TIDY", "clang-tidy-16")
    common = hashlib.sha256((tool + tool_versions() + open(os.path.join(ROOT, ".clang-tidy")).read())
                            .encode()).hexdigest()
    cmds = commands(build)
    depfiles = dependencies(build)
    unbuilt = [f for f in files if f in cmds and not depfiles.get(cmds[f][1])]
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        for f, deps in zip(unbuilt, pool.map(lambda f: preprocessor_dependencies(cmds[f][2]),
                                             unbuilt)):
            depfiles[cmds[f][1]] = deps
    out = {}
    for f in files:
        if f not in cmds:
            out[f] = None
            continue
        command, obj, _ = cmds[f]
        deps = depfiles.get(obj)
        if not deps:
            out[f] = None
            continue
        h = hashlib.sha256(f"{common}\n{command}\n".encode())
        # In the order of the names as hashed (relative to the checkout), not of the absolute
        # paths, which sort differently wherever the checkout is.
        named = {(os.path.relpath(d, ROOT) if d.startswith(ROOT + "/") else d): d for d in deps}
        for name in sorted(named):
            d = named[name]
            h.update(f"{name} {digest_of(d) if os.path.exists(d) else 'missing'}\n".encode())
        out[f] = h.hexdigest()
    return out


def recorded():
    if not os.path.exists(STAMPS):
        return {}
    pairs = (line.split() for line in open(STAMPS) if re.match(r"^[0-9a-f]{64} ", line))
    return {path: key for key, path in pairs}


def main(argv):
    if len(argv) < 3 or argv[0] not in ("pending", "record"):
        sys.exit(__doc__)
    mode, build, files = argv[0], argv[1], argv[2:]
    now = keys(build, files)
    if mode == "pending":
        clean = recorded() if not os.environ.get("IOBENCH_TIDY_ALL") else {}
        print("\n".join(f for f in files if now[f] is None or clean.get(f) != now[f]))
        return
    with open(STAMPS, "w") as out:
        out.write("# dev/tidy: the key of each source at its last clean check (dev/tidy_stamps.py)\n")
        out.writelines(f"{now[f]} {f}\n" for f in sorted(files) if now[f])


if __name__ == "__main__":
    main(sys.argv[1:])
