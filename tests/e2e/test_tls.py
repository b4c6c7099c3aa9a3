"""TLS end to end: both I/O models, record-aware counts, real certificates, kTLS reporting,
and the TLS fault list."""
import json
import os
import re
import socket
import ssl
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import BIN, ROOT, Server, hello_frame, pack_fields, proto_version, run

MiB = 1 << 20


def run_json(cache, *args):
    p = run(*args, "--json", "-", "-q", cache=cache, check=0)
    return json.loads(p.stdout)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    subprocess.run([str(ROOT / "tls" / "make-certs"), str(d / "good"), "--dns", "localhost",
                    "--ip", "127.0.0.1"], check=True, capture_output=True)
    subprocess.run([str(ROOT / "tls" / "make-certs"), str(d / "other")], check=True,
                   capture_output=True)
    return d


@pytest.fixture
def tls_server(certs, cache_dir):
    s = Server("--handshake-timeout", "2", "--idle-timeout", "5", "--tls-cert",
               certs / "good" / "server.crt", "--tls-key", certs / "good" / "server.key",
               cache=cache_dir)
    yield s
    s.stop()


@pytest.mark.parametrize("buf", [1024, 16384, 65536])
def test_socket_model_counts_records_like_valkey(cache_dir, buf):
    doc = run_json(cache_dir, "--proto", "tls", "--bytes", "1M", "--buf", buf)
    r = doc["results"][0]["runs"][0]
    s, v = r["sender"], r["receiver"]
    records = MiB // min(buf, 16384)
    # Partial-write mode: one SSL_write per record, one write(2) per SSL_write.
    assert s["io_calls"] == records
    assert s["tls"]["records_out"] == records
    assert s["syscalls"]["write"] == records
    # SSL_read returns at most one record; without read-ahead each costs two read(2) calls
    # (header, then body), more when a body arrives in pieces.
    assert v["io_calls"] == records
    assert v["tls"]["records_in"] == records
    assert 2 * records <= v["syscalls"]["read"] <= 3 * records
    assert s["tls"]["version"] == "TLSv1.3" and s["tls"]["cipher"] == "TLS_AES_128_GCM_SHA256"
    assert s["tls"]["io"] == "socket" and s["tls"]["verified"] is True
    assert s["tls"]["handshake_ns"] > 0
    assert s["xxh3"] == v["xxh3"]


def test_read_ahead_cuts_read_calls(cache_dir):
    doc = run_json(cache_dir, "--proto", "tls", "--bytes", "1M", "--buf", "1k", "--tls-read-ahead")
    v = doc["results"][0]["runs"][0]["receiver"]
    assert v["tls"]["read_ahead"] is True
    assert v["io_calls"] == 1024
    assert v["syscalls"]["read"] < 1024


@pytest.mark.parametrize("reverse", [False, True])
def test_bio_model_issues_one_syscall_per_buffer(cache_dir, reverse):
    args = ["--proto", "tls", "--tls-io", "bio", "--bytes", "1M", "--buf", "64k"]
    doc = run_json(cache_dir, *args, *(["--reverse"] if reverse else []))
    r = doc["results"][0]["runs"][0]
    s, v = r["sender"], r["receiver"]
    assert s["tls"]["io"] == "bio" and v["tls"]["io"] == "bio"
    assert s["io_calls"] == 16 and s["syscalls"]["write"] == 16  # whole 64K buffers
    assert s["tls"]["records_out"] == 64
    assert v["tls"]["records_in"] == 64
    # Each read(2) asks for up to 64K of ciphertext: far fewer than two per record.
    assert v["syscalls"]["read"] < 64


@pytest.mark.parametrize("version", ["1.2", "1.3"])
@pytest.mark.parametrize("cipher,name13,name12", [
    ("AES-128-GCM", "TLS_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256"),
    ("AES-256-GCM", "TLS_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"),
    ("CHACHA20-POLY1305", "TLS_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"),
])
def test_versions_and_ciphers_negotiate(cache_dir, version, cipher, name13, name12):
    doc = run_json(cache_dir, "--proto", "tls", "--bytes", "256k", "--tls-version", version,
                   "--cipher", cipher)
    t = doc["results"][0]["runs"][0]["receiver"]["tls"]
    assert t["version"] == f"TLSv{version}"
    assert t["cipher"] == (name13 if version == "1.3" else name12)
    assert t["group"]


def test_max_fragment_and_decompress(cache_dir):
    doc = run_json(cache_dir, "--proto", "tls", "--bytes", "1M", "--buf", "16k",
                   "--tls-max-fragment", "4k", "--decompress", "--reverse")
    r = doc["results"][0]["runs"][0]
    assert r["sender"]["tls"]["max_fragment_bytes"] == 4096
    assert r["sender"]["tls"]["records_out"] == 256
    assert r["receiver"]["decoded_bytes"] > MiB


def test_ktls_is_reported_never_assumed(cache_dir):
    doc = run_json(cache_dir, "--proto", "tls", "--bytes", "256k")
    k = doc["results"][0]["runs"][0]["sender"]["tls"]["ktls"]
    probe = subprocess.run(["sh", "-c", "grep -qw tls /proc/sys/net/ipv4/tcp_available_ulp"])
    if probe.returncode != 0:
        assert k.startswith("unavailable (kernel has no tls ULP"), k
        p = run("--proto", "tls", "--bytes", "256k", "--ktls", "on", cache=cache_dir)
        assert p.returncode != 0 and "--ktls on: kernel has no tls ULP" in p.stderr
    else:
        assert k.startswith("enabled"), k
    doc = run_json(cache_dir, "--proto", "tls", "--bytes", "256k", "--ktls", "off")
    assert doc["results"][0]["runs"][0]["sender"]["tls"]["ktls"] == "off"


def test_table_shows_tls_line_and_records(cache_dir):
    p = run("--proto", "tls", "--bytes", "256k", "-v", cache=cache_dir, check=0)
    assert "tls: TLSv1.3 TLS_AES_128_GCM_SHA256" in p.stdout
    assert "records" in p.stdout and "server verified" in p.stdout


# --- two hosts with real certificates -----------------------------------------------------------

def test_verified_client_against_cert_server(tls_server, certs, cache_dir):
    for host in ("127.0.0.1", "localhost"):
        doc = run_json(cache_dir, "client", "--connect", f"{host}:{tls_server.port}", "--proto",
                       "tls", "--tls-ca", certs / "good" / "ca.crt", "--bytes", "1M")
        assert doc["results"][0]["runs"][0]["sender"]["tls"]["verified"] is True
        assert "ok: received 1.0 MiB buf 16K over TLSv1.3" in tls_server.read_line()


def test_insecure_is_stated(tls_server, cache_dir):
    p = run("client", "--connect", tls_server.addr, "-v", "--proto", "tls", "--tls-insecure", "--bytes",
            "256k", cache=cache_dir, check=0)
    assert "server NOT verified (insecure)" in p.stdout


@pytest.mark.parametrize("args,needle", [
    (["--tls-ca", "{other}/ca.crt"], "certificate verify failed: unable to get local issuer certificate"),
    (["--tls-ca", "{good}/ca.crt", "--tls-server-name", "db.example"], "certificate verify failed: hostname mismatch"),
    ([], "certificate verify failed"),  # system CAs do not know our test CA
])
def test_verification_failures_name_the_reason(tls_server, certs, cache_dir, args, needle):
    args = [a.format(other=certs / "other", good=certs / "good") for a in args]
    p = run("client", "--connect", tls_server.addr, "--proto", "tls", *args, "--bytes", "256k",
            cache=cache_dir)
    assert p.returncode == 1 and needle in p.stderr, p.stderr
    assert "rejected: TLS handshake failed" in tls_server.read_line()
    run("client", "--connect", tls_server.addr, "--proto", "tls", "--tls-ca",
        certs / "good" / "ca.crt", "--bytes", "256k", "-q", cache=cache_dir, check=0)


def test_tls_client_against_tcp_server(server, cache_dir):
    t0 = time.monotonic()
    p = run("client", "--connect", server.addr, "--proto", "tls", "--tls-insecure", "--bytes",
            "256k", cache=cache_dir)
    assert time.monotonic() - t0 < 5
    assert p.returncode == 1
    assert "TLS handshake" in p.stderr and "--tls-cert" in p.stderr, p.stderr
    assert "TLS ClientHello, but this server has no certificate" in server.read_line()
    run("client", "--connect", server.addr, "--bytes", "256k", "-q", cache=cache_dir, check=0)


def test_tcp_client_against_tls_server(tls_server, cache_dir):
    p = run("client", "--connect", tls_server.addr, "--bytes", "256k", cache=cache_dir)
    assert p.returncode == 1 and "this server requires TLS" in p.stderr
    assert "rejected: this server requires TLS" in tls_server.read_line()


@pytest.mark.parametrize("args,needle", [
    (["--tls-cert", "/nonexistent.crt", "--tls-key", "{good}/server.key"], "cannot read --tls-cert '/nonexistent.crt'"),
    (["--tls-cert", "{good}/server.crt", "--tls-key", "/nonexistent.key"], "cannot read --tls-key '/nonexistent.key'"),
    (["--tls-cert", "{junk}", "--tls-key", "{good}/server.key"], "--tls-cert '{junk}'"),
    (["--tls-cert", "{good}/server.crt", "--tls-key", "{junk}"], "--tls-key '{junk}'"),
    (["--tls-cert", "{good}/server.crt", "--tls-key", "{other}/server.key"], "does not match"),
    (["--tls-cert", "{good}/server.crt"], "--tls-cert needs --tls-key"),
    (["--tls-cert", "{good}/server.crt", "--tls-key", "{good}"], "cannot read --tls-key '{good}': Is a directory"),
])
def test_bad_server_certificates(certs, tmp_path, args, needle):
    junk = tmp_path / "junk.pem"
    junk.write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    fmt = dict(good=certs / "good", other=certs / "other", junk=junk)
    args = [a.format(**fmt) for a in args]
    p = run("server", "--listen", "127.0.0.1:0", *args, timeout=10)
    assert p.returncode != 0
    assert needle.format(**fmt) in p.stderr, p.stderr
    assert p.stderr.strip().count("\n") == 0


def test_unreadable_key(certs, tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads any file; unreadable-file path needs a non-root user")
    key = tmp_path / "k.pem"
    key.write_bytes((certs / "good" / "server.key").read_bytes())
    key.chmod(0)
    p = run("server", "--tls-cert", certs / "good" / "server.crt", "--tls-key", key, timeout=10)
    assert p.returncode == 1 and "Permission denied" in p.stderr


@pytest.mark.parametrize("args,needle", [
    (["--cipher", "RC4"], "invalid --cipher 'RC4'"),
    (["--tls-version", "1.1"], "invalid --tls-version '1.1'"),
    (["--tls-io", "uring"], "invalid --tls-io 'uring'"),
    (["--tls-max-fragment", "100"], "invalid --tls-max-fragment '100'"),
    (["--ktls", "maybe"], "invalid --ktls 'maybe'"),
])
def test_bad_tls_options(args, needle):
    p = run("--proto", "tls", *args, timeout=10)
    assert p.returncode == 2 and needle in p.stderr


def test_tls_option_without_tls_is_an_error():
    p = run("--cipher", "AES-256-GCM", timeout=10)
    assert p.returncode == 2 and "--cipher needs --proto tls" in p.stderr


# --- a misbehaving TLS peer (Python's ssl module speaks our protocol) ---------------------------

def tls_client(server, certs, nbytes):
    ctx = ssl.create_default_context(cafile=str(certs / "good" / "ca.crt"))
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    s = ctx.wrap_socket(raw, server_hostname="localhost")
    s.sendall(hello_frame(nbytes=nbytes, proto="tls", tls_io="socket"))
    head = s.recv(12)
    assert head[:4] == b"IOBC" and struct.unpack("<H", head[6:8])[0] == 2, head
    s.recv(struct.unpack("<I", head[8:12])[0])
    return s


def test_close_without_close_notify_is_truncation(tls_server, certs, cache_dir):
    s = tls_client(tls_server, certs, MiB)
    s.sendall(b"\0" * 100000)
    s.close()  # no close_notify: a truncation, not an end
    line = tls_server.read_line()
    assert "failed:" in line and "without close_notify (truncated stream)" in line, line
    assert "100000 of 1048576" in line
    run("client", "--connect", tls_server.addr, "--proto", "tls", "--tls-ca",
        certs / "good" / "ca.crt", "--bytes", "256k", "-q", cache=cache_dir, check=0)


def test_close_notify_mid_stream_is_a_short_transfer(tls_server, certs):
    s = tls_client(tls_server, certs, MiB)
    s.sendall(b"\0" * 5000)
    try:
        s.unwrap()  # sends close_notify; the server's answer (its RESULT) may upset Python
    except (ssl.SSLError, OSError):
        pass
    s.close()
    line = tls_server.read_line()
    assert "failed:" in line and "close_notify" in line and "5000 of 1048576" in line, line


def test_alert_mid_stream_is_an_error(tls_server, certs, cache_dir):
    s = tls_client(tls_server, certs, MiB)
    s.sendall(b"\0" * 5000)
    os.write(s.fileno(), bytes([21, 3, 3, 0, 2, 2, 40]))  # fatal handshake_failure, in clear
    time.sleep(0.2)
    s.close()
    line = tls_server.read_line()
    assert "failed:" in line and "5000 of 1048576" in line, line
    assert tls_server.alive()
    run("client", "--connect", tls_server.addr, "--proto", "tls", "--tls-ca",
        certs / "good" / "ca.crt", "--bytes", "256k", "-q", cache=cache_dir, check=0)


def recv_exact(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        assert chunk, "peer closed"
        data += chunk
    return data


@pytest.mark.parametrize("ending", ["close_notify", "fatal-alert"])
def test_a_tls_alert_mid_stream_leaves_the_client_partial_figures(certs, ending):
    # A TLS "server" that acknowledges the HELLO, streams 300000 bytes of a 1 MiB --reverse run,
    # then ends the session with a close_notify, or a fatal alert in clear.
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs / "good" / "server.crt", certs / "good" / "server.key")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve():
        conn, _ = listener.accept()
        with ctx.wrap_socket(conn, server_side=True) as s:
            head = recv_exact(s, 12)
            recv_exact(s, struct.unpack("<I", head[8:12])[0])
            ack = pack_fields("ACK", {"server_version": "fake"})
            s.sendall(b"IOBC" + struct.pack("<HHI", proto_version(), 2, len(ack)) + ack)
            s.sendall(b"\0" * 300000)
            if ending == "close_notify":
                try:
                    s.unwrap()  # sends close_notify; the client's RESULT may upset Python
                except (ssl.SSLError, OSError):
                    pass
            else:
                os.write(s.fileno(), bytes([21, 3, 3, 0, 2, 2, 40]))  # handshake_failure
            time.sleep(0.5)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    p = run("client", "--connect", f"127.0.0.1:{port}", "--proto", "tls", "--tls-insecure",
            "--reverse", "--bytes", "1M", "--timeout", "5", "--syscalls", "off", "--json", "-",
            "-q", timeout=60)
    t.join(timeout=10)
    listener.close()
    assert p.returncode == 1, p.stderr
    r = json.loads(p.stdout)["results"][0]["runs"][0]
    assert r["partial"] is True and r["sender"] is None, r
    assert r["receiver"]["bytes"] == 300000 and "300000 of 1048576" in r["error"], r
    if ending == "close_notify":
        assert "close_notify" in r["error"], r


def test_server_refuses_uring_over_tls_socket_model(tls_server, certs):
    ctx = ssl.create_default_context(cafile=str(certs / "good" / "ca.crt"))
    raw = socket.create_connection(("127.0.0.1", tls_server.port), timeout=5)
    with ctx.wrap_socket(raw, server_hostname="localhost") as s:
        s.sendall(hello_frame(nbytes=MiB, proto="tls", engine="uring", tls_io="socket"))
        head = s.recv(12)
        assert head[:4] == b"IOBC" and struct.unpack("<H", head[6:8])[0] == 4  # ERROR
        body = s.recv(struct.unpack("<I", head[8:12])[0])
        assert b"engine uring over TLS needs the TLS I/O model bio" in body
    assert "rejected: engine uring over TLS needs the TLS I/O model bio" in tls_server.read_line()


@pytest.mark.parametrize("engine", ["epoll", "uring"])
@pytest.mark.parametrize("tls_io", ["socket", "bio"])
def test_tls_engines_fail_cleanly_when_the_client_dies(tls_server, certs, cache_dir, engine,
                                                       tls_io):
    if engine == "uring" and tls_io == "socket":
        pytest.skip("uring runs the bio model only")
    args = ["client", "--connect", tls_server.addr, "--proto", "tls", "--tls-ca",
            certs / "good" / "ca.crt", "--engine", engine, "--tls-io", tls_io]
    run("payload", "--bytes", "64M", "--out", os.devnull, cache=cache_dir, check=0)
    client = subprocess.Popen([BIN, *map(str, args), "--bytes", "64M", "--buf", "64",
                               "--cache-dir", cache_dir], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    tls_server.wait_for_data_phase(client)  # handshake done, into the data phase
    client.kill()
    client.wait()
    line = tls_server.read_line()
    # Killed mid-stream, or (a fast host moves 64 MiB within the second) after the data phase,
    # before its RESULT: either way a failure the server names, and it serves the next client.
    assert "failed:" in line and ("of 67108864 bytes" in line or "no result from peer" in line), line
    run(*args, "--bytes", "1M", "-q", cache=cache_dir, check=0)
    assert "ok:" in tls_server.read_line()


def test_each_tls_size_says_where_its_cpu_goes_beyond_the_crypto(cache_dir):
    p = run("--proto", "tls", "--bytes", "4M", "--buf", "1k,64k", "--json", "-", "-q",
            cache=cache_dir, check=0)
    doc = json.loads(p.stdout)
    timed = {c["record_bytes"]: c for c in doc["tls_crypto"]}
    assert sorted(timed) == [1024, 16384]  # 64K buffers still move 16 KiB records
    for c in timed.values():
        assert c["cipher"] == "AES-128-GCM" and c["encrypt_s_per_gib"] > 0
    # Small records cost more per byte to seal: a nonce and a tag each.
    assert timed[1024]["encrypt_s_per_gib"] > timed[16384]["encrypt_s_per_gib"]
    for r in doc["results"]:
        cost = r["tls_cost"]
        for side in ("sender", "receiver"):
            c = cost[side]
            assert c["record_bytes"] == (1024 if r["send_buf_bytes"] == 1024 else 16384)
            assert c["crypto_s_per_gib"] > 0
            assert abs(c["cpu_s_per_gib"] - c["crypto_s_per_gib"] - c["rest_s_per_gib"]) < 1e-9
        # The socket model: one write per record; at least a header read and a body read per
        # record (more when a body arrives in parts, as on a slow ASan build: 2.14 at 1K).
        assert cost["sender"]["syscalls_per_record"] == pytest.approx(1.0, abs=0.02)
        assert cost["receiver"]["syscalls_per_record"] >= 1.99
    table = run("--proto", "tls", "--bytes", "2M", "--buf", "16k", "-v", cache=cache_dir,
                check=0).stdout
    assert re.search(r"^   16K receiver [\d.]+ s/GiB: crypto [\d.]+ \(16384 B records\), the rest "
                     r"-?[\d.]+: -?[\d.]+ us per record, 2\.\d\d read syscalls per record \(a header "
                     r"read and a body read", table, re.M), table
    tcp = json.loads(run("--bytes", "1M", "--json", "-", "-q", cache=cache_dir, check=0).stdout)
    assert tcp["tls_crypto"] is None and "tls_cost" not in tcp["results"][0]


def test_one_server_serves_tcp_and_tls_on_two_ports(certs, cache_dir):
    # As a primary's port and tls-port: --listen serves TCP only, --tls-listen TLS only.
    s = Server("--handshake-timeout", "2", "--tls-listen", "127.0.0.1:0", "--tls-cert",
               certs / "good" / "server.crt", "--tls-key", certs / "good" / "server.key",
               cache=cache_dir)
    try:
        assert s.tls_addr and s.tls_addr != s.addr
        ca = ["--tls-ca", certs / "good" / "ca.crt"]
        for reverse in ([], ["--reverse"]):
            # --syscalls off: one run, one log line (auto adds a counting run)
            run("client", "--connect", s.addr, "--bytes", "1M", "-q", "--syscalls", "off",
                *reverse, cache=cache_dir, check=0)
            assert "ok: " in s.read_line() and " over tcp " in s.lines[-1], s.lines
            run("client", "--connect", s.tls_addr, "--proto", "tls", *ca, "--bytes", "1M", "-q",
                "--syscalls", "off", *reverse, cache=cache_dir, check=0)
            assert "ok: " in s.read_line() and "over TLSv1.3" in s.lines[-1], s.lines
        # The wrong protocol on either port is refused, and says where to go.
        p = run("client", "--connect", s.addr, "--proto", "tls", *ca, "--bytes", "1M",
                cache=cache_dir)
        assert p.returncode == 1 and "--tls-listen" in p.stderr, p.stderr
        assert f"rejected: TLS ClientHello on the TCP port: TLS is served on {s.tls_addr}" in \
            s.read_line()
        p = run("client", "--connect", s.tls_addr, "--bytes", "1M", cache=cache_dir)
        assert p.returncode == 1 and "this server requires TLS" in p.stderr, p.stderr
        assert "rejected: this server requires TLS" in s.read_line()
        run("client", "--connect", s.addr, "--bytes", "1M", "-q", cache=cache_dir, check=0)
    finally:
        s.stop()


def test_tls_listen_needs_a_certificate():
    p = run("server", "--listen", "127.0.0.1:0", "--tls-listen", "127.0.0.1:0")
    assert p.returncode != 0
    assert p.stderr.strip() == ("iobench: error: --tls-listen '127.0.0.1:0' needs --tls-cert "
                                "and --tls-key"), p.stderr
