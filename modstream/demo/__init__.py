"""modstream.demo."""
