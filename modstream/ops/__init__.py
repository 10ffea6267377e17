"""modstream.ops."""
