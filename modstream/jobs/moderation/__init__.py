"""modstream.jobs.moderation."""
