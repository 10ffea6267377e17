"""What `modstream bench` runs: one entry per variant, its command, the topic whose outputs time
it and its key in the JSON line. A new variant (another engine option of the moderation job, a
new peer) is one more entry in `VARIANTS`; modstream/bench/compare.py runs them in this order.
The confluent-kafka peer runs first: half its measured rate is the equal load every variant's
latency is taken at.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from modstream.core.config import PROJECT_ROOT, ROCKSDB_OPTIONS
from modstream.moderation.step import ALL_TOPICS

POLICY = PROJECT_ROOT / "policy_rules" / "global.yaml"
CHECKPOINT_INTERVAL_MS = 1_000
OUT_OF_ORDERNESS_MS = 500
# Extra options for the moderation job, to try a setting with the same harness, e.g.
# MODSTREAM_BENCH_JOB_ARGS="--sink-property linger.ms=20 --flink-conf k=v"
# (modstream/jobs/options.py).
JOB_ARGS = shlex.split(os.environ.get("MODSTREAM_BENCH_JOB_ARGS", ""))
# Every Flink variant keeps its keyed state as the deployment does (deploy/k8s/config.yaml,
# flink-moderation.yaml): RocksDB with its options (ROCKSDB_OPTIONS), incremental checkpoints.
# On the heap each 1 s checkpoint copied all of it: with the 55,000 versions of `--steady` held
# (85 MB), checkpoints took up to 18 s and the job's p99 at the equal load was 17.1 s; with
# RocksDB 2.5 s (docs/BENCHMARKS.md).
STATE_BACKEND = [
    "--flink-conf", "state.backend.type=rocksdb",
    "--flink-conf", "execution.checkpointing.incremental=true",
    *(arg for key, value in ROCKSDB_OPTIONS.items() for arg in ("--flink-conf", f"{key}={value}")),
]  # fmt: skip
# The moderation job's engine, named so that the bench measures issue 26's Java keyed operator
# whatever the job's default (batched since 2026-12-04); MODSTREAM_BENCH_JOB_ARGS="--engine
# pyflink" measures the other.
ENGINE = ["--engine", "batched"]

Command = Callable[[str, dict[str, str], Path], list[str]]


@dataclass(frozen=True)
class Variant:
    name: str  # as `--variants` names it
    key: str  # its stem in the JSON line: `<key>_eps`, `cpu_us_per_event_<key>`
    output: str  # the contract topic its outputs are timed on
    command: Command  # (prefix, contract -> physical topic, run dir) -> argv
    flink_job: str | None = None  # the Flink job's name (its log); None: a plain process
    per_input: bool = False  # one output per input record: done when there are as many

    @property
    def is_peer(self) -> bool:
        return self.flink_job is None


def _mapping(topics: dict[str, str]) -> list[str]:
    return [arg for name in ALL_TOPICS for arg in ("--topic", f"{name}={topics[name]}")]


def _job(prefix: str, topics: dict[str, str], run_dir: Path) -> list[str]:
    """The options every Flink variant shares: checkpoints, transactions, its topics."""
    return [
        "--checkpoint-dir", str(run_dir / "ckpt"),
        "--checkpoint-interval-ms", str(CHECKPOINT_INTERVAL_MS),
        "--transactional-id-prefix", prefix, "--group-id", prefix, *_mapping(topics),
        *STATE_BACKEND,
    ]  # fmt: skip


def peer(client: str) -> Command:
    def command(prefix: str, topics: dict[str, str], _run_dir: Path) -> list[str]:
        return [
            sys.executable, "-m", "modstream.bench.peer", "--client", client, "--group", prefix,
            "--policy", str(POLICY), *_mapping(topics),
        ]  # fmt: skip

    return command


def floor(module: str) -> Command:
    def command(prefix: str, topics: dict[str, str], run_dir: Path) -> list[str]:
        job = _job(prefix, topics, run_dir)
        return [sys.executable, "-m", module, "--output", topics["floor.out"], *job]

    return command


def moderation(prefix: str, topics: dict[str, str], run_dir: Path) -> list[str]:
    return [
        sys.executable, "-m", "modstream.jobs.moderation.job", *_job(prefix, topics, run_dir),
        "--policy", str(POLICY),
        "--out-of-orderness-ms", str(OUT_OF_ORDERNESS_MS), "--idleness-ms", "1000",
        # No faults here: a backlog that falls silent is complete after 2 s, not 60 s.
        "--drained-after-ms", "2000",
        *ENGINE,
        *JOB_ARGS,
    ]  # fmt: skip


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("confluent-kafka", "peer_ck", "moderation.actions", peer("confluent-kafka")),
        Variant(
            "confluent-kafka-eos", "peer_ck_eos", "moderation.actions", peer("confluent-kafka-eos")
        ),
        Variant("kafka-python", "peer_kp", "moderation.actions", peer("kafka-python")),
        Variant(
            "java-floor",
            "java_floor",
            "floor.out",
            floor("modstream.bench.java_floor"),
            flink_job="java-floor",
            per_input=True,
        ),
        Variant(
            "floor",
            "pyflink_floor",
            "floor.out",
            floor("modstream.bench.floor_job"),
            flink_job="floor",
            per_input=True,
        ),
        Variant("modstream", "modstream", "moderation.actions", moderation, flink_job="moderation"),
    )
}
EQUAL_LOAD_FROM = "confluent-kafka"
EQUAL_LOAD_SHARE = 0.5
