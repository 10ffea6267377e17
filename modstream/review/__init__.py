"""modstream.review."""
