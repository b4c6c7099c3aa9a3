"""Real Valkey and Redis: one server and its syncs (`replsynclib`, `realsync`), the probes around
a sync (`syncload`), the sync and knee reports (`replsync_report`, `replknee_report`), the pull
requests and their builds (`valkeypr`), Valkey's own tests (`valkeytests`), and the evidence a
reviewer reads (`upstreamlib`, `valkeyevidence`)."""
