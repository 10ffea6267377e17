"""modstream.cli."""
