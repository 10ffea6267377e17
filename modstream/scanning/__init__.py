"""modstream.scanning."""
