"""modstream.jobs.scan."""
