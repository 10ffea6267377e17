"""modstream.jobs."""
