"""Where the jobs run: the local Kafka and Redis, a local Flink session cluster, the package a
cluster runs, Kubernetes manifests. Layer: over `jobs`."""
