"""Test tools shipped with the code (docs/TESTING.md): builders of contract records and policies,
the per-version driver of the moderation step, fakes of Flink for the job adapters, made media
and fake detectors, helpers for integration tests on a real stack, and the pytest plugin
(`modstream.testing.plugin`, entry point `pytest11`) with the shared fixtures.

Import the module you need (`from modstream.testing.records import upload`); nothing is
imported here, so `import modstream.testing.records` pulls in neither pytest nor Kafka clients.
Only the plugin imports pytest; `fuzz.strategies` needs Hypothesis and `console` httpx (the
dev extra). modstream.testing imports any of modstream but its CLI and benchmarks.
"""
