#!/usr/bin/env bash
# Whose CPU the emulated link's receive path is, with threaded NAPI (issue #76 item 6):
# scripts/netns-link --napi off|own at 4K, 16K and 64K over TCP, both sides pinned (sender 0,
# receiver 1), ROUNDS interleaved rounds (the cells' order rotated each round), each run's
# iobench JSON kept here as runs/CELL-ROUND.json, then summary.md from them. Root; nothing else
# running. Usage: results/napi-link/measure.sh [ROUNDS] (default 5)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-5}
out=results/napi-link
mkdir -p "$out/runs"
cells=(off-4k own-4k off-16k own-16k off-64k own-64k)
for ((r = 1; r <= rounds; r++)); do
  n=${#cells[@]}
  for ((i = 0; i < n; i++)); do
    cell=${cells[$(((i + r) % n))]}
    napi=${cell%%-*} buf=${cell#*-}
    scripts/netns-link --napi "$napi" -- --proto tcp --buf "$buf" --cpus 0,1 --bytes 1G -q \
      --json "$out/runs/$cell-$r.json" 2>/dev/null
  done
  echo "napi-link: round $r/$rounds done" >&2
done
/usr/bin/python3 -s - "$out" <<'PY' > "$out/summary.md"
import glob, json, os, statistics, subprocess, sys
out = sys.argv[1]
def stat(v):
    return f"{statistics.median(v):.3f} [{min(v):.3f}-{max(v):.3f}]"
rows, host = {}, None
for path in sorted(glob.glob(os.path.join(out, "runs", "*.json"))):
    d = json.load(open(path))
    host = host or d.get("context", {}).get("host") or d.get("context", {})
    cell = os.path.basename(path).rsplit("-", 1)[0]
    r = d["results"][0]["runs"][0]
    s, v = r["sender"], r["receiver"]
    gib = s["bytes"] / 2**30
    rx = r["softirqs"]["net_rx_per_cpu"]
    rows.setdefault(cell, []).append({
        "sender": s["cpu_s_per_gib"], "receiver": v["cpu_s_per_gib"],
        "host": s["host_busy"]["busy_ns"] / 1e9 / gib, "gbps": s["throughput_gbps"],
        "rx0": rx[0] / max(1, sum(rx))})
print("# Threaded NAPI on the emulated link: whose CPU the receive path is\n")
print(f"- command: `results/napi-link/measure.sh` ({len(next(iter(rows.values())))} rounds)")
print(f"- host: {subprocess.run(['uname', '-r'], capture_output=True, text=True).stdout.strip()}, "
      f"{open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}, "
      f"{os.cpu_count()} CPUs")
print("- each cell: `scripts/netns-link --napi NAPI -- --proto tcp --buf SIZE --cpus 0,1 --bytes 1G`"
      " (5 Gbit/s, MTU 9001); medians [min-max] over the rounds; host = every CPU's busy time "
      "over the sender's data phase per GiB (/proc/stat), which counts the NAPI threads that "
      "neither process is charged; NET_RX on CPU 0 = the sender's CPU's share of the run's "
      "NET_RX softirqs\n")
print("| size | --napi | sender s/GiB | receiver s/GiB | host s/GiB | Gbit/s | NET_RX on CPU 0 |")
print("|---|---|---|---|---|---|---|")
for size in ("4k", "16k", "64k"):
    for napi in ("off", "own"):
        rs = rows.get(f"{napi}-{size}")
        if not rs:
            continue
        col = lambda k: [x[k] for x in rs]  # noqa: E731
        print(f"| {size} | {napi} | {stat(col('sender'))} | {stat(col('receiver'))} | "
              f"{stat(col('host'))} | {stat(col('gbps'))} | "
              f"{statistics.median(col('rx0')) * 100:.0f}% |")
print("\n64K/16K sender CPU ratio, median of paired rounds [min-max]:\n")
for napi in ("off", "own"):
    a, b = rows.get(f"{napi}-64k", []), rows.get(f"{napi}-16k", [])
    ratios = [x["sender"] / y["sender"] for x, y in zip(a, b)]
    hr = [x["host"] / y["host"] for x, y in zip(a, b)]
    if ratios:
        print(f"- --napi {napi}: sender {stat(ratios)}, host {stat(hr)}")
PY
echo "napi-link: wrote $out/summary.md" >&2
