"""modstream.policy."""
