"""modstream.analytics."""
