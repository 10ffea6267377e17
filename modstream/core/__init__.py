"""modstream.core."""
