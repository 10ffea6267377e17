"""Fuzzing every input topic of the moderation job (issue 11, docs/reliability/fuzz.md)."""
