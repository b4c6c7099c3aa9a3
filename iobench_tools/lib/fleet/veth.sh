# Sourced by scripts/netns-link and scripts/netns-fleet: the emulated link between two network
# namespaces, written once.
#
# claim_name NAME: holds a lock on the namespaces NAME-* for as long as this process (and what it
# execs) lives, or exits naming the run that holds them. Every start deletes stale namespaces of
# its name, so a second run of one name would tear down the first's link in the middle of its
# measurement.
claim_name() {
  local lock=/run/lock/iobench-netns-$1.lock
  mkdir -p /run/lock
  exec 9>>"$lock"
  flock -n 9 || { echo "netns-link: the namespaces '$1-*' are in use by another run" \
    "(lock $lock): wait for it, or give another --name" >&2; exit 1; }
}

# veth_link NS_A DEV_A NS_B DEV_B MTU RATE: a veth pair DEV_A (in NS_A) <-> DEV_B (in NS_B), both
# ends up at MTU with a tbf rate cap RATE (EC2's per-flow cap is 5gbit). The namespaces exist.
veth_link() {
  local ns_a=$1 dev_a=$2 ns_b=$3 dev_b=$4 mtu=$5 rate=$6 ns dev
  # A run killed between `link add` and `link set netns` leaves the pair in this namespace, and
  # every later run of its name would fail with "File exists". The caller holds the name's lock,
  # so a device of these names here is such a leftover: deleting one end deletes the pair.
  ip link del "$dev_a" 2>/dev/null || true
  ip link del "$dev_b" 2>/dev/null || true
  ip link add "$dev_a" type veth peer name "$dev_b"
  ip link set "$dev_a" netns "$ns_a"
  ip link set "$dev_b" netns "$ns_b"
  for ns_dev in "$ns_a $dev_a" "$ns_b $dev_b"; do
    read -r ns dev <<<"$ns_dev"
    ip -n "$ns" link set "$dev" up mtu "$mtu"
    # tbf: the rate cap. Its bucket must hold at least rate/HZ bytes (2.5 MB at 5 Gbit/s and
    # HZ=250) or the timer granularity, not the rate, sets the throughput.
    tc -n "$ns" qdisc add dev "$dev" root tbf rate "$rate" burst 4mb latency 20ms ||
      { echo "netns-link: tc tbf rate '$rate' refused" >&2; exit 1; }
  done
}
