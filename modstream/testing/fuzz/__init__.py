"""Fuzzing every input topic of the moderation job (issue 11, docs/reliability/fuzz.md):
Hypothesis strategies of valid and hostile records (`strategies`, needs the dev extra's
hypothesis), the job's adapters in process (`pipeline`), and the census command
(`python -m modstream.testing.fuzz.census`)."""
