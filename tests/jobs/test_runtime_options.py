"""The options every job takes (modstream/jobs/runtime.py): KEY=VALUE pairs parsed once, clearly
refused."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from modstream.jobs.options import OWN_CLIENT_PROPERTIES, client_property, job_parser, key_value


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


def test_a_checkpoint_location_is_a_directory_or_a_remote_stores_uri(tmp_path: Path) -> None:
    from modstream.jobs.options import location

    assert location(str(tmp_path)) == tmp_path
    assert location(f"file://{tmp_path}/a%20b") == tmp_path / "a b"
    assert location("s3://bucket/modstream/checkpoints") == "s3://bucket/modstream/checkpoints"
    with pytest.raises(argparse.ArgumentTypeError, match="s3://"):
        location("ftp://host/checkpoints")


def test_a_remote_store_restores_only_what_it_is_given() -> None:
    from modstream.jobs import restore

    assert restore.resolve_remote("auto", "s3://b/c") is None
    assert restore.resolve_remote("none", "s3://b/c") is None
    assert restore.resolve_remote("s3://b/c/x/chk-7", "s3://b/c") == "s3://b/c/x/chk-7"
    with pytest.raises(restore.RestoreError, match="needs a checkpoint directory the job can list"):
        restore.resolve_remote("latest", "s3://b/c")
    # One deployment per location: its transactional-id prefix stays the same across starts.
    assert (
        restore.default_prefix("moderation", "s3://b/c")
        == restore.default_prefix("moderation", "s3://b/c")
        != restore.default_prefix("moderation", "s3://b/d")
    )
