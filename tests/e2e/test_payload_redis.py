"""The payload is a real replication stream: redis-server accepts every command."""
import os
import shutil
import socket
import subprocess
import time

import pytest

from conftest import run


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.real_server
@pytest.mark.skipif(not shutil.which("redis-server") or not shutil.which("redis-cli")
                    or not shutil.which("zstd"),
                    reason="redis-server, redis-cli or zstd not installed (scripts/setup --studies installs them)")
def test_redis_accepts_every_command(cache_dir, tmp_path):
    out = tmp_path / "payload.zst"
    run("payload", "--out", str(out), "--bytes", "8M", "--seed", "5", cache=cache_dir, check=0)
    assert out.stat().st_size == 8 << 20
    port = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                              text=True).stdout.strip() == "PONG":
                break
            time.sleep(0.1)
        pipe = subprocess.run(f"zstd -dc {out} | redis-cli -p {port} --pipe", shell=True,
                              capture_output=True, text=True, timeout=120)
        assert pipe.returncode == 0, pipe.stdout + pipe.stderr
        assert "errors: 0" in pipe.stdout, pipe.stdout
        replies = int(pipe.stdout.rsplit("replies:", 1)[1].strip())
        assert replies > 1000
        info = subprocess.run(["redis-cli", "-p", str(port), "info", "keyspace"],
                              capture_output=True, text=True).stdout
        keys = sum(int(part.split("=")[1]) for line in info.splitlines() if line.startswith("db")
                   for part in line.split(":")[1].split(",") if part.startswith("keys="))
        assert keys > 1000, info
    finally:
        redis.kill()
        redis.wait()
