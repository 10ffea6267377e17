"""Kubernetes manifests made from the code, so they cannot drift from it: one Strimzi
`KafkaTopic` per topic of modstream/core/topics.py, checked in as deploy/k8s/kafka-topics.yaml
(`python -m modstream.stack.k8s > deploy/k8s/kafka-topics.yaml`; tests/deploy compares the two).
docs/DEPLOY.md says how they are applied."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any

import yaml

from modstream.core.topics import TOPICS, TopicSpec

NAMESPACE = "modstream"
# The Strimzi `Kafka` resource the topics belong to (label strimzi.io/cluster).
KAFKA_CLUSTER = "modstream-kafka"
# Three replicas: a broker can be lost or restarted without losing a committed record.
REPLICAS = 3
HEADER = (
    "# Generated from modstream/core/topics.py by `python -m modstream.stack.k8s`: do not edit,"
    " regenerate.\n# tests/deploy/test_manifests.py fails when this file and the code differ.\n"
)


def kafka_topic(
    spec: TopicSpec,
    *,
    cluster: str = KAFKA_CLUSTER,
    namespace: str = NAMESPACE,
    replicas: int = REPLICAS,
) -> dict[str, Any]:
    """A Strimzi KafkaTopic for `spec`. Topic names are lower case with dots, valid Kubernetes
    names, so the resource is named as the topic (Strimzi then needs no spec.topicName)."""
    metadata: dict[str, Any] = {
        "name": spec.name,
        "namespace": namespace,
        "labels": {"strimzi.io/cluster": cluster, "app.kubernetes.io/part-of": "modstream"},
    }
    if spec.purpose:
        metadata["annotations"] = {"modstream.io/purpose": spec.purpose}
    return {
        "apiVersion": "kafka.strimzi.io/v1beta2",
        "kind": "KafkaTopic",
        "metadata": metadata,
        "spec": {
            "partitions": spec.partitions,
            "replicas": replicas,
            "config": dict(spec.config),
        },
    }


def kafka_topics_yaml(specs: Iterable[TopicSpec] = TOPICS, **options: Any) -> str:
    """Every topic's KafkaTopic as one multi-document YAML file, in the order of `specs`."""
    documents = [kafka_topic(spec, **options) for spec in specs]
    return HEADER + yaml.safe_dump_all(documents, sort_keys=False, explicit_start=True)


def main(argv: list[str] | None = None) -> int:
    """Print the KafkaTopic manifests (deploy/k8s/kafka-topics.yaml)."""
    parser = argparse.ArgumentParser(prog="python -m modstream.stack.k8s", description=__doc__)
    parser.add_argument("--cluster", default=KAFKA_CLUSTER, help="the Strimzi Kafka resource")
    parser.add_argument("--namespace", default=NAMESPACE)
    parser.add_argument("--replicas", type=int, default=REPLICAS)
    args = parser.parse_args(argv)
    sys.stdout.write(
        kafka_topics_yaml(cluster=args.cluster, namespace=args.namespace, replicas=args.replicas)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
