"""`modstream demo`: the workload, the media it makes, the run over a local stack or a cluster,
its summary and the demo's reviewer. Layer: over `analytics`, `console`, `ops` and `stack`."""
