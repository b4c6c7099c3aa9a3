"""No client can take what others need (issue #88, docs/hardening.md "Bounds on a shared host"):
a freed payload's budget given back at once, not when a later session looks in the cache."""
from conftest import Server, run

MiB = 1 << 20


def reverse_client(server, seed, cache_dir, nbytes="8M"):
    return run("client", "--connect", server.addr, "--bytes", nbytes, "--reverse", "--seed", seed,
               "-q", cache=cache_dir, timeout=60)


def test_a_freed_payload_gives_its_budget_back(cache_dir, tmp_path):
    # A 12M budget holds one 8 MiB payload (the spare kept for a next run of it) with room
    # for a session's buffers, not two beside a ghost. Before #88, the payload the cache let go
    # of kept its bytes taken until the next session's look in the cache (the budget's hold
    # lived in the deleter, which libstdc++ destroys with the control block, when the cache's
    # weak reference goes): every second new seed was refused "server's memory full".
    seeds = list(range(300, 306))
    for seed in seeds:  # built into the cache first: the server loads each, no build's CPU
        run("payload", "--seed", seed, "--bytes", "8M", "-o", tmp_path / "p.zst", "-q",
            cache=cache_dir, check=0)
    s = Server("--memory-budget", "12M", "--quiet", cache=cache_dir)
    try:
        outcomes = [reverse_client(s, seed, cache_dir) for seed in seeds]
        refused = [(seed, p.stderr.strip()) for seed, p in zip(seeds, outcomes) if p.returncode]
        assert not refused, refused
        assert s.alive()
    finally:
        s.stop()
