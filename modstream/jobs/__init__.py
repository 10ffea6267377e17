"""The Flink jobs: thin adapters that wire Kafka sources and exactly-once sinks to the pure cores
below (moderation/, scan/, enforce, reconciler, ingest_check), the runtime every job shares,
restore, metrics, and the jobs-and-topics graph (docs/architecture.md). Layer: over the cores."""
