"""Fuzzing every input topic of the moderation job (issue 11, docs/RELIABILITY.md, "Fuzzing the
inputs")."""
