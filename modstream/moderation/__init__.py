"""modstream.moderation."""
