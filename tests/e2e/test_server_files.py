"""Files a client or another user cannot swap (docs/hardening.md, issue #75): the payload cache
writes through a checked directory with O_CREAT | O_EXCL | O_NOFOLLOW and renames without
following a link; a cache directory or token file another user could write is refused."""
import os
import pwd

import pytest

from conftest import BIN, Server, run


def nobody():
    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:
        pytest.skip("no user 'nobody' to own a file")


def test_a_planted_link_at_the_cache_temp_name_is_not_written_through(tmp_path):
    # On the code before #75 the server's std::ofstream followed the link and truncated its
    # target (65,536 payload bytes over a root-owned file), and the entry was left a link.
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    s = Server(cache=str(cache))
    try:
        name = "resp-v2-seed77-l3-65536.zst"
        os.symlink(target, cache / f"{name}.tmp.{s.proc.pid}")
        os.symlink(target, cache / name)  # the entry itself a link: never mapped through
        p = run("client", "--connect", s.addr, "--reverse", "--bytes", "64K", "--seed", "77",
                "-q", timeout=60)
        assert p.returncode == 0, p.stderr
        assert target.read_text() == "keep me\n"
        assert not (cache / name).is_symlink() and (cache / name).stat().st_size == 65536
        assert not (cache / f"{name}.tmp.{s.proc.pid}").exists()
    finally:
        s.stop()


def test_a_cache_directory_others_can_write_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    p = run("payload", "--bytes", "64K", "-o", tmp_path / "p.zst", "--cache-dir", shared)
    assert p.returncode != 0
    assert f"payload cache '{shared}' refused: its mode 1777 lets others write it" in p.stderr
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    os.chown(other, nobody(), -1)
    p = run("payload", "--bytes", "64K", "-o", tmp_path / "p.zst", "--cache-dir", other)
    assert p.returncode != 0 and "is owned by uid" in p.stderr, p.stderr


def test_the_fallback_cache_is_per_user(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "XDG_CACHE_HOME")}
    import subprocess
    p = subprocess.run([BIN, "payload", "--bytes", "64K", "--seed", "4242", "-o",
                        str(tmp_path / "p.zst")], env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    d = f"/tmp/iobench-cache-{os.geteuid()}"
    st = os.stat(d)
    assert st.st_uid == os.geteuid() and st.st_mode & 0o022 == 0
    assert os.path.exists(f"{d}/resp-v2-seed4242-l3-65536.zst")


@pytest.mark.parametrize("mode,owner,why", [
    (0o666, None, "its mode 666 lets others write it"),
    (0o620, None, "its mode 620 lets others write it"),
    (0o600, "nobody", "neither this user"),
])
def test_a_token_file_others_could_write_is_refused(tmp_path, mode, owner, why):
    f = tmp_path / "token"
    f.write_text("a" * 40 + "\n")
    os.chmod(f, mode)
    if owner:
        os.chown(f, nobody(), -1)
    p = run("server", "--auth-token", f"@{f}")
    assert p.returncode != 0 and why in p.stderr, p.stderr


def test_a_literal_token_is_warned_about():
    s = Server("--auth-token", "b" * 40)
    try:
        assert s.alive()
    finally:
        s.stop()
    assert "a literal --auth-token can be read by every user" in s.stderr_text()
