"""Sweeps and fan-out scenarios, run and read: a sweep's rows (`sweeplib`), its runs on
the experiment kernel (`sweeprun`), its A/A control (`noisefloor`), many sweeps read together
(`repeatability`), a fan-out scenario's cells and verdicts (`fanoutcells`, `fanoutlib`)."""
