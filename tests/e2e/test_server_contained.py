"""One request cannot end the server (docs/hardening.md): every byte a session asks the server to
hold is counted against --session-memory and --memory-budget before it is allocated (an io_uring
receiver of --qd 4096 x --buf 16M aborted the server with std::bad_alloc before), and whatever
throws in a session's handler ends that session alone: the server logs it in one line, counts it
and serves the next client. IOBENCH_TEST_THROW (src/util/test_throw.h) makes each named site
throw once, as a failed allocation or thread start would."""
import pytest

from conftest import Server, run

from test_server_memory import rss_mib, sanitized

MiB = 1 << 20


def peak_rss_mib(pid):
    return rss_mib(pid, "VmHWM")


def test_buffers_past_the_caps_are_refused_before_they_are_allocated(cache_dir):
    s = Server("--memory-budget", "64M", cache=cache_dir)
    try:
        base = rss_mib(s.proc.pid)
        # 2 x 4096 provided buffers of 16 MiB: 128 GiB, refused by the per-session cap.
        p = run("client", "--connect", s.addr, "--recv-engine", "uring", "--qd", "4096",
                "--buf", "16M", "--bytes", "4M", "-q", cache=cache_dir, timeout=60)
        assert p.returncode != 0
        assert "--session-memory 256.0 MiB" in p.stderr and "128.02 GiB" in p.stderr, p.stderr
        assert s.alive(), s.stderr_text()
        # 4 MiB + a ring of 16 x 4 MiB: 68 MiB, within the cap, past the 64 MiB budget.
        p = run("client", "--connect", s.addr, "--recv-engine", "uring", "--qd", "8",
                "--buf", "4M", "--bytes", "4M", "-q", cache=cache_dir, timeout=60)
        assert p.returncode != 0
        assert "--memory-budget 64.0 MiB" in p.stderr, p.stderr
        # --qd 8 --buf 16M (272 MiB: it took the server to 280 MiB RSS before) refused too.
        p = run("client", "--connect", s.addr, "--recv-engine", "uring", "--qd", "8",
                "--buf", "16M", "--bytes", "4M", "-q", cache=cache_dir, timeout=60)
        assert p.returncode != 0 and "--session-memory" in p.stderr, p.stderr
        # Within both: served, and a plain client after it.
        p = run("client", "--connect", s.addr, "--recv-engine", "uring", "--qd", "4",
                "--buf", "1M", "--bytes", "8M", "-q", cache=cache_dir, timeout=60)
        assert p.returncode == 0, p.stderr
        p = run("client", "--connect", s.addr, "--bytes", "8M", "-q", cache=cache_dir, timeout=60)
        assert p.returncode == 0, p.stderr
        peak = peak_rss_mib(s.proc.pid)
        print(f"server RSS {base:.0f} MiB at start, peak {peak:.0f} MiB under --memory-budget 64M")
        if not sanitized():
            assert peak < base + 64 + 16, (base, peak)
        assert s.alive(), s.stderr_text()
    finally:
        s.stop()


# Each site, what a client that reaches it sees, and what the server logs.
SITES = {
    "handler": ("client", "the session's handler ended on std::bad_alloc"),
    "ring-alloc": ("uring", "the session's handler ended on std::bad_alloc"),
    "deadline-watch": ("client", "the session's handler ended on test: no thread"),
    "payload-helper": ("reverse", "rejected: compressing the payload: std::bad_alloc"),
    "payload-thread": ("reverse", None),  # a helper that cannot start: the build is slower only
}


@pytest.mark.parametrize("site", sorted(SITES))
def test_each_throw_site_ends_its_session_and_the_server_serves_the_next(site, tmp_path):
    how, logged = SITES[site]
    # A fresh cache: a --reverse session builds its payload (the payload sites are in the build).
    s = Server("--min-rate", "1M", env={"IOBENCH_TEST_THROW": site}, cache=tmp_path)
    args = {"client": [], "uring": ["--recv-engine", "uring"],
            "reverse": ["--reverse", "--seed", "5"]}[how]
    try:
        first = run("client", "--connect", s.addr, "--bytes", "4M", "-q", *args, cache=tmp_path,
                    timeout=60)
        lines = []
        while not any("ok:" in l or "failed:" in l or "rejected:" in l for l in lines):
            lines.append(s.read_line())
        if logged:
            assert first.returncode != 0
            assert any(logged in l for l in lines), lines
            # One line, counted.
            if "handler ended" in logged:
                assert any("1 handler(s) failed since start" in l for l in lines), lines
        else:
            assert first.returncode == 0, first.stderr
        assert s.alive(), s.stderr_text()
        # The site fires once: the next client, the same request, is served.
        again = run("client", "--connect", s.addr, "--bytes", "4M", "-q", *args, cache=tmp_path,
                    timeout=60)
        assert again.returncode == 0, again.stderr
        assert s.alive(), s.stderr_text()
    finally:
        s.stop()
