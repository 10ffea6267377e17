"""modstream.stack."""
