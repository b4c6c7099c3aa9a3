"""What the commands share: the binary and sizes (`iobenchlib`), the experiment kernel that runs a
scenario's cells in rounds and resumes it (`experiment`), statistics (`statslib`), reading
sweeps, fan-outs and fleets (`sweeplib`, `fanoutlib`, `fleetlib`), the real-replication
harness (`replsynclib` and its reports), CPU in a cgroup (`cgroup_cpu`) and the interpreter's
modules (`needs`). A library imports only other libraries, never a command."""
