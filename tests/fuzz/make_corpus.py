#!/usr/bin/env python3
"""Writes the seed corpus for the protocol fuzzer: one valid frame of each message type (built
independently of the C++ encoder, like the e2e tests' hello_frame) and a few broken ones."""
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from conftest import hello_frame, pack_fields, proto_version  # noqa: E402


def s(t):
    return struct.pack("<H", len(t)) + t.encode()


def frame(kind, body):
    return b"IOBC" + struct.pack("<HHI", proto_version(), kind, len(body)) + body


def main():
    out = Path(__file__).resolve().parent / "corpus"
    out.mkdir(exist_ok=True)
    seeds = {
        "hello": hello_frame(),
        "hello-tls-group": hello_frame(proto="tls", tls_io="bio", conns=4, group_id=7, token="t"),
        # The sessions whose bytes cost the server most: a decoder (its window bounded at 2 MiB),
        # a shared --source-window span, a payload build at a level past the cap.
        "hello-decompress": hello_frame(fields={"decompress": True}),
        "hello-source-window": hello_frame(client_sends=False, nbytes=8 << 20,
                                           fields={"seed": 5, "source_window": 1 << 20}),
        "hello-build": hello_frame(client_sends=False, nbytes=64,
                                   fields={"payload_bytes": 16 << 20, "zstd_level": 19}),
        "ack": frame(2, s("0.1.0")),
        "error": frame(4, s("busy")),
        "result": frame(3, pack_fields("RESULT", {"io.bytes": 4096, "engine": "uring",
                                                  "placement.pinned_cpu": 1,
                                                  "placement.allowed_cpus": "0-1"})),
        "progress": frame(6, struct.pack("<QQq", 1 << 20, 1 << 30, 1000000)),
        "challenge": frame(7, s("ab" * 32)),
        "auth": frame(8, s("cd" * 64)),
        # GROUP: sender, conns, failed, 4 x i64, source, note, total, pairs, policy, peak_live,
        # peak buffer, peak rss, 1 timeline point, 1 change, dropped, error.
        "group": frame(5, struct.pack("<?II4q", True, 2, 0, 1, 2, 3, 4) + s("perf_event") + s("")
                       + struct.pack("<QH", 9, 1) + s("write") + struct.pack("<Q", 9)
                       + s("fixed 16K") + struct.pack("<IQQ", 2, 32768, 1 << 20)
                       + struct.pack("<IqIQ", 1, 5, 1, 16384)
                       + struct.pack("<IqIQQIQ", 1, 5, 0, 0, 16384, 1, 16384)
                       + struct.pack("<Q", 0) + s("")),
        "bad-magic": b"GET / HTTP/1.1\r\n\r\n",
        "huge-length": b"IOBC" + struct.pack("<HHI", 1, 1, 0xFFFFFFF0),
        "long-list": frame(5, struct.pack("<?II4q", True, 2, 0, 1, 2, 3, 4) + s("") + s("")
                           + struct.pack("<QH", 0, 0) + s("") + struct.pack("<IQQ", 0, 0, 0)
                           + struct.pack("<I", 0x7FFFFFFF)),
    }
    for name, data in seeds.items():
        (out / name).write_bytes(data)
    print(f"wrote {len(seeds)} seeds to {out}")


if __name__ == "__main__":
    main()
