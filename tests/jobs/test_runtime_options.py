"""The options every job takes (jobs/runtime.py): KEY=VALUE pairs parsed once, clearly refused."""

from __future__ import annotations

import argparse

import pytest

from jobs.runtime import job_parser, key_value


def test_kafka_properties_and_topics_are_key_value_pairs() -> None:
    args = job_parser("moderation", None).parse_args(
        [
            "--kafka-property", "security.protocol=SASL_PLAINTEXT",
            "--kafka-property", "sasl.jaas.config=a=b c=d",
            "--source-property", "fetch.min.bytes=65536",
            "--sink-property", "linger.ms=20",
            "--topic", "content.versions=demo.content.versions",
            "--flink-conf", "state.changelog.enabled=true",
        ]
    )  # fmt: skip
    assert dict(args.kafka_property) == {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.jaas.config": "a=b c=d",  # the value keeps its own '='
    }
    assert dict(args.source_property) == {"fetch.min.bytes": "65536"}
    assert dict(args.sink_property) == {"linger.ms": "20"}
    assert dict(args.topic) == {"content.versions": "demo.content.versions"}
    assert dict(args.flink_conf) == {"state.changelog.enabled": "true"}


@pytest.mark.parametrize("item", ["linger.ms", "=20", ""])
def test_a_pair_without_a_key_or_an_equals_sign_is_refused(item: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected KEY=VALUE"):
        key_value(item)


def test_the_parser_refuses_a_malformed_pair_with_its_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        job_parser("scan", None).parse_args(["--sink-property", "linger.ms"])
    assert "--sink-property" in capsys.readouterr().err
