"""The moderation job (`python -m modstream.jobs.moderation`): job.py wires it; the adapters
(decode, broadcast, reports, moderate, sanctions) wrap modstream.moderation's step for PyFlink,
and java.py and batch.py run it behind the batched Java operator (deploy/flink-ext)."""
