"""modstream.enforcement."""
