"""modstream.trust."""
