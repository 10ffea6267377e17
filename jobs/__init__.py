"""Flink job wiring: sources, keys, thin adapters around operators/, sinks. No decision logic."""
