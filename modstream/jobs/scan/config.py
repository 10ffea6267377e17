"""The scan job's options, config and pools (modstream/jobs/scan/job.py runs them): what a
deployment tells it (`--pool`, `--capacity-rps`, batch sizes, workers) and how several pools share
one job."""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pyflink.datastream import DataStream

from modstream.core.config import Settings
from modstream.core.limits import Limits
from modstream.detectors import scan
from modstream.detectors.raw_output import RawOutputStore, store_at
from modstream.jobs import runtime
from modstream.jobs.keys import job_keyring
from modstream.jobs.options import job_parser
from modstream.scanning.pools import POOLS, Pool, parse_pool
from modstream.trust.signing import Keyring

# What every pool writes; each reads its own `Pool.topics()` (docs/architecture.md draws both:
# modstream/jobs/graph.py).
OUTPUT_TOPICS = ("detector.results", "moderation.dlq")

SCAN_DOC = (
    "scan: scan requests of some modality pools -> detectors on ONNX Runtime -> detector.results."
)


@dataclass(frozen=True, kw_only=True)
class ScanConfig(runtime.TopicNames):
    max_batch: int = 32
    max_wait_ms: int = 20
    max_attempts: int = scan.MAX_ATTEMPTS
    # Concurrent model calls, one ONNX intra-op thread each: on 2 cores two callers scored
    # 22k texts/s where one caller with two intra-op threads scored 14k (docs/BENCHMARKS.md).
    model_workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    onnx_threads: int = 1
    # Batching keys per detector: 1 at parallelism 1; above it, requests of one detector are
    # spread over 8 keys per subtask (keys hash to subtasks; few keys would leave some idle).
    shards: int = 1
    # The only folder media references may point into (MODSTREAM_MEDIA_ROOT, --media-root).
    media_root: str = field(default_factory=lambda: str(Settings.from_env().media_root))
    limits: Limits = field(default_factory=Limits.from_env)
    # Keys the results are signed with (contract v1.1, the detector's own key).
    keyring: Keyring = field(default_factory=Keyring)
    clock: Callable[[], int] = runtime.wall_clock_ms  # processing time, ms; tests inject one
    # Admission (modstream/scanning/admission.py): requests a second one detector of this pool
    # answers; None: measured from its batches.
    capacity_rps: float | None = None
    # Requests waiting per batching key above which the operator waits for a worker instead
    # of reading on (a backlog then waits in Kafka, not in memory); None: 64 full batches per
    # model worker (32k texts or 512 images with 2 workers: more than a deadline's worth of
    # either, docs/BENCHMARKS.md).
    max_waiting: int | None = None
    # How often the oldest waiting request's age is reported, ms.
    metrics_every_ms: int = 1_000
    # Where each result's raw output is kept (--raw-output-dir; modstream/detectors/raw_output.py);
    # None: not kept.
    raw_output_dir: str | None = None

    @property
    def waiting_bound(self) -> int:
        return self.max_waiting or 64 * self.max_batch * self.model_workers

    @property
    def raw_outputs(self) -> RawOutputStore | None:
        """The store, opened where the job runs (on first use in a model worker; one per
        directory and process: modstream/detectors/raw_output.py `store_at`; the config itself is
        pickled)."""
        return store_at(self.raw_output_dir) if self.raw_output_dir else None


def pools_from(args: argparse.Namespace) -> list[Pool]:
    """`--pool` (repeated), else `--modalities` as one pool, else every shipped pool."""
    if args.pool:
        pools = [parse_pool(spec) for spec in args.pool]
    elif args.modalities:
        pools = [parse_pool(args.modalities)]
    else:
        pools = list(POOLS)
    names = [pool.name for pool in pools]
    served = [m for pool in pools for m in pool.modalities]
    if len(set(names)) != len(names) or len(set(served)) != len(served):
        raise ValueError("scan: pool names must be distinct and pools share no modality")
    return pools


def run_pools(
    job: runtime.JobConfig,
    settings: Settings,
    pools: list[Pool],
    configs: dict[str, ScanConfig],
    build: Callable[..., None],
    *,
    detached: bool,
) -> int:
    """Several pools in one job (the local demo: one JVM on a 2-core machine instead of one per
    pool): each its own Kafka source and group (`<group>-<pool>`), batcher, admission and
    model workers; one exactly-once sink for all."""
    from pyflink.common import WatermarkStrategy

    names = {pool.name: [job.topic(topic) for topic in pool.topics()] for pool in pools}
    if runtime.inputs_missing(job, [name for listed in names.values() for name in listed]):
        return 2
    env = runtime.create_env(job, settings)
    results: list[DataStream] = []
    for pool in pools:
        own = dataclasses.replace(job, group_id=f"{job.group_id}-{pool.name}")
        source = env.from_source(
            runtime.kafka_source(own, names[pool.name]),
            WatermarkStrategy.no_watermarks(),
            f"scan {pool.name} inputs",
            type_info=runtime.SOURCE_ROW,
        ).uid(f"scan_source_{pool.name}")
        build(env, source, results.append, configs[pool.name], pool.name)
    runtime.exactly_once_sink(job)(results[0].union(*results[1:]))
    if job.restore_from:
        print(f"scan: restoring from {job.restore_from}", flush=True)
    return runtime.run(env, job.name, detached=detached)


def options() -> argparse.ArgumentParser:
    """Every job's options (modstream/jobs/options.py) and the scan job's own."""
    parser = job_parser("scan", SCAN_DOC)
    parser.add_argument(
        "--pool",
        action="append",
        default=[],
        metavar="NAME=MODALITY[,MODALITY]",
        help="a modality pool, repeated for several in one job "
        "(default: text=text image=image av=video,audio)",
    )
    parser.add_argument(
        "--modalities", default=None, help="comma-separated: one pool (same as --pool)"
    )
    parser.add_argument(
        "--max-batch",
        type=int,
        default=None,
        help="requests per model call (default: 256 for text only, else 4; docs/BENCHMARKS.md)",
    )
    parser.add_argument("--max-wait-ms", type=int, default=20)
    parser.add_argument("--max-attempts", type=int, default=scan.MAX_ATTEMPTS)
    _admission_options(parser)
    parser.add_argument(
        "--model-workers",
        type=int,
        default=None,
        help="concurrent model calls per subtask (default: the cores / --parallelism)",
    )
    parser.add_argument(
        "--onnx-threads",
        type=int,
        default=int(os.environ.get("MODSTREAM_ONNX_THREADS") or 1),
        help="ONNX Runtime intra-op threads per model call (default 1, or MODSTREAM_ONNX_THREADS)",
    )
    parser.add_argument(
        "--media-root",
        type=Path,
        default=None,
        help="the only folder media references may point into "
        "(default: MODSTREAM_MEDIA_ROOT, else RUN_DIR/media)",
    )
    parser.add_argument(
        "--raw-output-dir",
        type=Path,
        default=None,
        help="keep each result's raw detector output there (0700, files 0600, 30 days; "
        "docs/retention.md); default: not kept",
    )
    return parser


def _admission_options(parser: argparse.ArgumentParser) -> None:
    """Admission's options (modstream/scanning/admission.py, docs/scanning.md "Admission")."""
    parser.add_argument(
        "--capacity-rps",
        type=float,
        default=None,
        help="requests a second one detector answers, for admission "
        "(default: measured from its batches; modstream/scanning/admission.py)",
    )
    parser.add_argument(
        "--max-waiting",
        type=int,
        default=None,
        help="requests waiting per batching key above which the pool stops reading until a "
        "worker answers (default: 64 full batches per model worker)",
    )


def deployment_config(
    args: argparse.Namespace, settings: Settings, pools: list[Pool]
) -> runtime.JobConfig:
    """One deployment per set of pools: its own checkpoint directory, and with it its
    transactional ids and group."""
    slug = "-".join(pool.name for pool in pools)
    if args.checkpoint_dir is None:
        args.checkpoint_dir = settings.run_dir / "checkpoints" / f"scan-{slug}"
    job = runtime.job_config("scan", args, settings)
    if all(pool.modalities == ("text",) for pool in pools):
        return job
    # A backlog of slow records (tens of ms each) would hold checkpoint barriers back and,
    # with them, every commit of the exactly-once sink: let barriers overtake buffers. The
    # job's own --flink-conf still wins (it carries the checkpoint storage on Kubernetes).
    return dataclasses.replace(
        job,
        flink_conf={
            "execution.checkpointing.unaligned.enabled": "true",
            "taskmanager.network.memory.buffer-debloat.enabled": "true",
            **job.flink_conf,
        },
    )


def pool_config(
    args: argparse.Namespace, job: runtime.JobConfig, settings: Settings, pool: Pool
) -> ScanConfig:
    """Batch size by modality (large for text, small for media), model workers sharing the
    cores among subtasks, and 8 batching keys per subtask above parallelism 1."""
    return ScanConfig(
        max_batch=args.max_batch or (256 if pool.modalities == ("text",) else 4),
        max_wait_ms=args.max_wait_ms,
        max_attempts=args.max_attempts,
        model_workers=max(1, args.model_workers or (os.cpu_count() or 1) // job.parallelism),
        shards=1 if job.parallelism == 1 else 8 * job.parallelism,
        onnx_threads=max(1, args.onnx_threads),
        media_root=str((args.media_root or settings.media_root).resolve()),
        limits=Limits.from_env(),
        topics=job.topics,
        keyring=job_keyring("scan", job.bootstrap_servers, job.kafka_properties),
        capacity_rps=args.capacity_rps,
        max_waiting=args.max_waiting,
        raw_output_dir=str(args.raw_output_dir.resolve()) if args.raw_output_dir else None,
    )
