"""The options every modstream job takes (README, `modstream job NAME -- --help`): where it
reads and writes, how it checkpoints, how Flink runs it; `runtime.job_config` turns them into
a JobConfig."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from urllib.parse import unquote

from modstream.core.config import OWN_CLIENT_PROPERTIES
from modstream.core.endpoints import METRICS_PORTS
from modstream.jobs.runtime import TRANSACTION_TIMEOUT_MS


def job_parser(name: str, description: str | None) -> argparse.ArgumentParser:
    """The options every modstream job takes (README, `modstream job NAME -- --help`)."""
    parser = argparse.ArgumentParser(prog=name, description=description)
    _kafka_options(parser)
    _checkpoint_options(parser, name)
    _execution_options(parser)
    return parser


def _kafka_options(parser: argparse.ArgumentParser) -> None:
    """Where the job reads and writes: the broker, the sink's transactions, topic names."""
    parser.add_argument(
        "--bootstrap-servers",
        default=None,
        help="Kafka bootstrap servers (default: the local stack's)",
    )
    parser.add_argument(
        "--transactional-id-prefix",
        default=None,
        help="the sink's transactional ids (default: modstream-JOB-<8 hex of --checkpoint-dir>,"
        " recorded in the directory; one per deployment)",
    )
    parser.add_argument(
        "--transaction-timeout-ms",
        type=int,
        default=TRANSACTION_TIMEOUT_MS,
        help="the sink's Kafka transaction.timeout.ms (below the broker's maximum); a restore"
        " later than this after a crash finds the broker aborted the open transactions",
    )
    parser.add_argument(
        "--group-id", default=None, help="consumer group (default: as the transactional ids)"
    )
    parser.add_argument(
        "--topic",
        action="append",
        type=key_value,
        default=[],
        metavar="CONTRACT=PHYSICAL",
        help="map a contract topic to another physical topic (repeatable)",
    )
    for flag, whose in (
        ("--source-property", "the source's consumer (e.g. fetch.min.bytes)"),
        ("--sink-property", "the sink's producer (e.g. linger.ms)"),
    ):
        parser.add_argument(
            flag,
            action="append",
            type=client_property,
            default=[],
            metavar="KEY=VALUE",
            help=f"a Kafka client property for {whose} (repeatable); not one modstream sets"
            " (group, isolation, transactions: their own options)",
        )


REMOTE_SCHEMES = ("s3", "s3a", "s3p", "gs", "hdfs", "abfs", "abfss", "wasb", "wasbs", "oss")


def location(text: str) -> Path | str:
    """A checkpoint location: a local directory (a path or file:// URI) as a Path, or the URI of
    a store Flink writes through its file-system plugins (kept as given)."""
    scheme, sep, rest = text.partition("://")
    if not sep:
        return Path(text)
    if scheme == "file":
        return Path(unquote(rest))
    if scheme not in REMOTE_SCHEMES:
        stores = ", ".join(f"{name}://" for name in REMOTE_SCHEMES)
        raise argparse.ArgumentTypeError(f"{text}: a directory, file://… or one of {stores}")
    return text


def _checkpoint_options(parser: argparse.ArgumentParser, name: str) -> None:
    """Where checkpoints go, how often, and which one the job starts from."""
    parser.add_argument(
        "--checkpoint-dir",
        type=location,
        default=None,
        help=f"where checkpoints go: a directory, file://…, or a remote store's URI (s3://…)"
        f" (default: RUN_DIR/checkpoints/{name})",
    )
    parser.add_argument("--checkpoint-interval-ms", type=int, default=5_000)
    parser.add_argument(
        "--restore-from",
        default="auto",
        help="auto (default): the newest checkpoint in --checkpoint-dir whose outputs the broker"
        " still holds, or empty state when there is none; latest: the same, but fail without"
        " one; none: empty state even where checkpoints exist; or a checkpoint path",
    )


def empty_state_option(parser: argparse.ArgumentParser) -> None:
    """A job that refuses committed offsets without their state (modstream/jobs/restore.py)."""
    parser.add_argument(
        "--accept-empty-state",
        action="store_true",
        help="start on the consumer group's committed offsets with no checkpoint to restore "
        "(the job refuses otherwise): logged; versions read before are not decided again",
    )


def _execution_options(parser: argparse.ArgumentParser) -> None:
    """How Flink runs the job: parallelism, detached, restarts, any other option."""
    parser.add_argument("--parallelism", type=int, default=1)
    parser.add_argument(
        "--detached",
        action="store_true",
        help="return once the job is submitted (`flink run -d` on a cluster)",
    )
    parser.add_argument(
        "--restart-strategy",
        default=None,
        choices=["none", "fixed-delay", "exponential-delay"],
        help="Flink's restart strategy (default: Flink's; tests use none to see any failure)",
    )
    parser.add_argument(
        "--metrics-port",
        default=os.environ.get("MODSTREAM_METRICS_PORT", METRICS_PORTS),
        help="serve Flink's metrics for Prometheus on this port, or the first free one of a"
        f" range A-B (default: MODSTREAM_METRICS_PORT or {METRICS_PORTS}; off: none)",
    )
    parser.add_argument(
        "--flink-conf",
        action="append",
        type=key_value,
        default=[],
        metavar="KEY=VALUE",
        help="any Flink configuration option, after modstream's own (repeatable), e.g."
        " state.changelog.enabled=true",
    )


def key_value(item: str) -> tuple[str, str]:
    """An option's KEY=VALUE (the value may hold '=')."""
    key, equals, value = item.partition("=")
    if not key or not equals:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {item!r}")
    return key, value


def positive_int(text: str) -> int:
    """An option's integer, at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def non_negative_int(text: str) -> int:
    """An option's integer, at least 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, not {value}")
    return value


# What the job's Kafka clients must keep as modstream sets them (exactly-once, restore).


def client_property(item: str) -> tuple[str, str]:
    """A Kafka client property to tune (KEY=VALUE); one modstream sets is refused."""
    key, value = key_value(item)
    if key in OWN_CLIENT_PROPERTIES:
        raise argparse.ArgumentTypeError(
            f"{key} is set by modstream (exactly-once, restore); use the job's own options"
        )
    return key, value
