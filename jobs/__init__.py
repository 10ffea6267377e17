"""Flink job wiring: sources, keys, thin adapters around operators/, sinks. No decision logic."""

from modstream import logs as _logs

# The interpreter that runs a job's operators (Flink's thread mode embeds one in the JVM that
# the job's main started) imports this package first: it logs as that main does.
_logs.configure_worker()
