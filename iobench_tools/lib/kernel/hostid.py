"""Which host a result came from (issue #66): its CPU model and count, kernel, machine,
virtualisation and OpenSSL, as the sweep's manifest records them and as iobench's JSON context
states them in every cell. Two results are one host's only when their key (CPU model, CPU count,
kernel, machine) is the same: the pilot's Intel Xeon on fc-v657 and the design's AMD EPYC on
fc-v782 differ about 3x in per-call cost and name different TLS answers."""
import os
import platform
import re
import shutil
import subprocess

KEY_FIELDS = ("cpu_model", "cpus", "kernel", "machine")


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cpu_identity():
    """What the CPU is beyond its model name, which a VM often makes generic ("AMD EPYC",
    "Intel(R) Xeon(R) Processor"): vendor, family, model, stepping (CPUID's, as the kernel
    decoded them), microcode and cpu0's caches; as iobench's context block records them."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        return None
    caches = {}
    for i in range(8):
        d = f"/sys/devices/system/cpu/cpu0/cache/index{i}/"
        try:
            level, kind, size = (open(d + n).read().strip() for n in ("level", "type", "size"))
        except OSError:
            break
        caches[f"L{level}" + {"Data": "d", "Instruction": "i"}.get(kind, "")] = size
    return {"vendor": fields.get("vendor_id", "unknown"),
            "family": fields.get("cpu family", "unknown"), "model": fields.get("model", "unknown"),
            "stepping": fields.get("stepping", "unknown"),
            "microcode": fields.get("microcode", "unknown"), "caches": caches}


def _virtualisation():
    """systemd-detect-virt's word, else the CPU's hypervisor flag, else "none" or "unknown"."""
    if shutil.which("systemd-detect-virt"):
        try:
            p = subprocess.run(["systemd-detect-virt"], capture_output=True, text=True,
                               timeout=10)
            if p.stdout.strip():
                return p.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        with open("/proc/cpuinfo") as f:
            return "hypervisor" if " hypervisor" in f.read() else "none"
    except OSError:
        return "unknown"


def _openssl():
    try:
        return subprocess.run(["openssl", "version"], capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def local_host():
    """This machine, as a sweep's manifest records it."""
    return {"cpu_model": _cpu_model(), "cpu": _cpu_identity(), "cpus": os.cpu_count(),
            "kernel": f"Linux {platform.release()}", "machine": platform.machine(),
            "virtualisation": _virtualisation(), "openssl": _openssl()}


def host_of_context(ctx):
    """The host an iobench JSON's context block states (no virtualisation there)."""
    return {"cpu_model": ctx.get("cpu_model", "unknown"), "cpu": ctx.get("cpu"),
            "cpus": ctx.get("cpus_online"),
            "kernel": ctx.get("kernel", "unknown"), "machine": ctx.get("machine", "unknown"),
            "openssl": (ctx.get("libraries") or {}).get("openssl", "unknown")}


def cpu_id(host):
    """"AuthenticAMD 25/1/1": vendor family/model/stepping, or None (a result made before
    2026-12-02 recorded the model name alone)."""
    cpu = host.get("cpu") or {}
    if not cpu.get("vendor") or cpu.get("vendor") == "unknown":
        return None
    return f"{cpu['vendor']} {cpu.get('family')}/{cpu.get('model')}/{cpu.get('stepping')}"


def host_key(host):
    """The identity results are grouped by: "AMD EPYC [AuthenticAMD 25/1/1], 2 CPUs, Linux
    6.18.44-fc-v782, x86_64" (the CPUID part where the result recorded it)."""
    ident = cpu_id(host)
    model = f"{host.get('cpu_model')} [{ident}]" if ident else host.get("cpu_model")
    return f"{model}, {host.get('cpus')} CPUs, {host.get('kernel')}, {host.get('machine')}"


def same_host(key_a, key_b):
    """Two keys of one host: equal, or equal but for the CPUID part one of them lacks (a
    result recorded before CPUID was)."""
    if key_a == key_b:
        return True
    strip = lambda k: re.sub(r" \[[^\]]*\],", ",", k, count=1)  # noqa: E731
    return (("[" in key_a) != ("[" in key_b)) and strip(key_a) == strip(key_b)


def cpu_line(host):
    """CPUID, microcode, caches and hypervisor, for a report's header; None when unrecorded."""
    ident = cpu_id(host)
    if not ident:
        return None
    cpu = host["cpu"]
    caches = " ".join(f"{k} {v}" for k, v in sorted((cpu.get("caches") or {}).items()))
    parts = [f"CPUID {ident}", f"microcode {cpu.get('microcode')}"]
    if caches:
        parts.append(caches)
    if cpu.get("hypervisor"):
        parts.append(f"hypervisor {cpu['hypervisor']}")
    return ", ".join(parts)


def host_line(host):
    """A report's host line: every figure below it is this host's (an older run did not record
    it, and the line says so)."""
    if not host:
        return "- host: not recorded by this run (before the host was recorded in every result)"
    line = (f"- host: {host_key(host)}, {host.get('virtualisation', 'virtualisation unknown')}, "
            f"{host.get('openssl')}")
    cpu = cpu_line(host)
    return line + (f"\n- cpu: {cpu}" if cpu else "")


def short_key(key):
    """A host key made short for a table's header: "Intel Xeon, 2 CPUs, fc-v657"."""
    parts = [x.strip() for x in key.split(",")]
    cpu = " ".join(w for w in parts[0].replace("(R)", "").replace("(TM)", "").split()
                   if w not in ("Processor", "CPU"))
    cpu = re.sub(r"\[(?:GenuineIntel|AuthenticAMD|\S+) ", "[", cpu)  # "[25/1/1]": family/model/stepping
    kernel = parts[2].split("-", 1)[1] if len(parts) > 2 and "-" in parts[2] else \
        (parts[2] if len(parts) > 2 else "?")
    return ", ".join([cpu] + parts[1:2] + [kernel])


def link_text(netns):
    """The emulated link a sweep ran on, or where it ran."""
    if not netns:
        return "no emulated link"
    return f"emulated link {netns.get('rate')} (tbf, both ends), MTU {netns.get('mtu')}"
