"""Which host a result came from (issue #66): its CPU model and count, kernel, machine,
virtualisation and OpenSSL, as the sweep's manifest records them and as iobench's JSON context
states them in every cell. Two results are one host's only when their key (CPU model, CPU count,
kernel, machine) is the same: the pilot's Intel Xeon on fc-v657 and the design's AMD EPYC on
fc-v782 differ about 3x in per-call cost and name different TLS answers."""
import os
import platform
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
    return {"cpu_model": _cpu_model(), "cpus": os.cpu_count(),
            "kernel": f"Linux {platform.release()}", "machine": platform.machine(),
            "virtualisation": _virtualisation(), "openssl": _openssl()}


def host_of_context(ctx):
    """The host an iobench JSON's context block states (no virtualisation there)."""
    return {"cpu_model": ctx.get("cpu_model", "unknown"), "cpus": ctx.get("cpus_online"),
            "kernel": ctx.get("kernel", "unknown"), "machine": ctx.get("machine", "unknown"),
            "openssl": (ctx.get("libraries") or {}).get("openssl", "unknown")}


def host_key(host):
    """The identity results are grouped by: "AMD EPYC, 2 CPUs, Linux 6.18.44-fc-v782, x86_64"."""
    return f"{host.get('cpu_model')}, {host.get('cpus')} CPUs, {host.get('kernel')}, " \
           f"{host.get('machine')}"


def host_line(host):
    """A report's host line: every figure below it is this host's (an older run did not record
    it, and the line says so)."""
    if not host:
        return "- host: not recorded by this run (before the host was recorded in every result)"
    return (f"- host: {host_key(host)}, {host.get('virtualisation', 'virtualisation unknown')}, "
            f"{host.get('openssl')}")


def short_key(key):
    """A host key made short for a table's header: "Intel Xeon, 2 CPUs, fc-v657"."""
    parts = [x.strip() for x in key.split(",")]
    cpu = " ".join(w for w in parts[0].replace("(R)", "").replace("(TM)", "").split()
                   if w not in ("Processor", "CPU"))
    kernel = parts[2].split("-", 1)[1] if len(parts) > 2 and "-" in parts[2] else \
        (parts[2] if len(parts) > 2 else "?")
    return ", ".join([cpu] + parts[1:2] + [kernel])


def link_text(netns):
    """The emulated link a sweep ran on, or where it ran."""
    if not netns:
        return "no emulated link"
    return f"emulated link {netns.get('rate')} (tbf, both ends), MTU {netns.get('mtu')}"
