"""A host named by what it is (issue #77): CPUID's vendor, family, model and stepping beside a
model name a VM makes generic, in the key results are grouped by and in every report's header;
a result recorded before CPUID was still pairs with this host's."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from iobench_tools.lib.kernel import hostid

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))


def cpuinfo():
    fields = {}
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def test_the_key_and_the_header_name_the_cpuid():
    info = cpuinfo()
    if "vendor_id" not in info:
        pytest.skip("no vendor_id in /proc/cpuinfo (not x86)")
    host = hostid.local_host()
    ident = f"{info['vendor_id']} {info['cpu family']}/{info['model']}/{info['stepping']}"
    assert f"[{ident}]" in hostid.host_key(host)
    assert f"CPUID {ident}, microcode {info.get('microcode', 'unknown')}" in hostid.host_line(host)
    # Two VMs of one generic model name, different CPUs: two hosts.
    other = json.loads(json.dumps(host))
    other["cpu"]["model"] = str(int(info["model"]) + 1)
    assert not hostid.same_host(hostid.host_key(host), hostid.host_key(other))
    # A result recorded before CPUID was: the same host by the rest of its key.
    old = {k: v for k, v in host.items() if k != "cpu"}
    assert hostid.same_host(hostid.host_key(old), hostid.host_key(host))
    assert "[" not in hostid.host_key(old)


def test_iobench_and_the_scripts_record_the_same_cpu():
    if not os.access(BIN, os.X_OK):
        pytest.skip(f"{BIN} not built")
    p = subprocess.run([BIN, "--bytes", "1M", "--json", "-", "-q"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    ctx = json.loads(p.stdout)["context"]
    mine = hostid.host_of_context(ctx)
    assert hostid.host_key(mine) == hostid.host_key(hostid.local_host())
    cpu = ctx["cpu"]
    assert cpu["caches"] == hostid.local_host()["cpu"]["caches"]
    assert cpu["hypervisor"]  # "none" on bare metal, a vendor signature in a VM
