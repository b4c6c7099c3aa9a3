"""Other hosts: a fleet's pairs read as sweeps or fan-outs (`fleetlib`), the two-host sweep's
server over ssh (`remoteserver`); `veth.sh` is the emulated link's veth pair and tbf cap that
scripts/netns-link and scripts/netns-fleet source."""
