"""The options every job takes (jobs/runtime.py): KEY=VALUE pairs parsed once, clearly refused."""

from __future__ import annotations

import argparse

import pytest

from jobs.options import OWN_CLIENT_PROPERTIES, client_property, job_parser, key_value


def test_client_properties_topics_and_flink_options_are_key_value_pairs() -> None:
    args = job_parser("moderation", None).parse_args(
        [
            "--source-property", "fetch.min.bytes=65536",
            "--sink-property", "linger.ms=20",
            "--sink-property", "compression.type=lz4",
            "--topic", "content.versions=demo.content.versions",
            "--flink-conf", "env.java.opts.all=-Da=b",
        ]
    )  # fmt: skip
    assert dict(args.source_property) == {"fetch.min.bytes": "65536"}
    assert dict(args.sink_property) == {"linger.ms": "20", "compression.type": "lz4"}
    assert dict(args.topic) == {"content.versions": "demo.content.versions"}
    assert dict(args.flink_conf) == {"env.java.opts.all": "-Da=b"}  # the value keeps its '='


@pytest.mark.parametrize("item", ["linger.ms", "=20", ""])
def test_a_pair_without_a_key_or_an_equals_sign_is_refused(item: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected KEY=VALUE"):
        key_value(item)


@pytest.mark.parametrize("key", sorted(OWN_CLIENT_PROPERTIES))
def test_a_property_modstream_sets_cannot_be_overridden(key: str) -> None:
    """Exactly-once and restore rely on them (isolation, transactions, group)."""
    with pytest.raises(argparse.ArgumentTypeError, match=f"{key} is set by modstream"):
        client_property(f"{key}=x")


def test_the_parser_refuses_a_bad_pair_with_the_option_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv in (["--sink-property", "linger.ms"], ["--source-property", "isolation.level=x"]):
        with pytest.raises(SystemExit):
            job_parser("scan", None).parse_args(argv)
        assert argv[0] in capsys.readouterr().err
