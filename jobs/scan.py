"""scan: scan requests of some modalities -> detectors on ONNX Runtime -> detector.results.

Run one scan job per group of modalities (`--modalities text`, `--modalities image,video`), so
expensive media never starve cheap text: each job has its own source, slots and sessions.
Requests are keyed by detector and batched dynamically by a Java operator (flush at
`--max-batch` requests or `--max-wait-ms` after the first one), so Python is entered once per
batch; within a batch live goes before backfill; one `session.run` per batch and detector
(udfs/scan.py), in a worker thread while the operator prepares the next batch. Transient
media-load failures are retried per request on processing-time timers with backoff and jitter,
up to a maximum of attempts and the request's deadline, then answered `timeout`; corrupt,
unsupported or hostile media (a reference outside `--media-root`, a device, a FIFO, more bytes
than declared; udfs/media.py) is answered `error` plus a DLQ record of class `permanent`, and
so is a request whose handling throws anything else: one record never stops the job, and a
batch restored from a checkpoint that fails again fails per request. Results and DLQ rows go
through one exactly-once sink.

This module is the wiring and the Flink adapter (`Scan`); what happens to a batch's rows
(decoding, media loading, model calls, results, DLQ rows, retries) is operators/scan_batch.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyflink.common import Row, Types
from pyflink.datastream import DataStream, KeyedStream, StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor
from pyflink.java_gateway import get_gateway

from jobs import metrics, runtime
from jobs.keys import job_keyring
from jobs.options import job_parser
from jobs.scan_metrics import ScanMetrics, detector_of
from modstream import logs
from modstream.config import Settings
from modstream.limits import Limits
from operators.scan_batch import (
    Handled,
    error_kind,
    handle_safely,
    refuse,
    scan_requests,
    unforeseen,
)
from operators.signing import Keyring
from udfs import scan
from udfs.detector import Detector
from udfs.raw_output import RawOutputStore, store_at
from udfs.registry import detector

LOG = logging.getLogger("modstream.scan")
MODALITIES = ("text", "image", "video", "audio")


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
    # Where each result's raw output is kept (--raw-output-dir; udfs/raw_output.py); None: not
    # kept.
    raw_output_dir: str | None = None

    @property
    def raw_outputs(self) -> RawOutputStore | None:
        """The store, opened where the job runs (on first use in a model worker; one per
        directory and process: udfs/raw_output.py `store_at`; the config itself is pickled)."""
        return store_at(self.raw_output_dir) if self.raw_output_dir else None


@dataclass
class InFlight:
    future: Future[Handled]
    rows: str  # the batch as JSON [topics, keys, values], for keyed state
    drain_at: int


class Scan(KeyedProcessFunction):
    """Batches from the Java `Batcher` (keyed by detector) through the detectors. Emits one
    `Row(topics[], keys[], values[])` per batch, split for the sink by the Java `Unbatch`.

    A batch is handled whole (validation, media loading, one model call per detector, result
    records) by one of `model_workers` threads; ONNX Runtime releases the GIL and each call
    uses `onnx_threads` intra-op threads (docs/BENCHMARKS.md: on 2 cores two callers with one
    thread each outscore one caller with two). This thread only hands batches over and emits
    what comes back, in arrival order. Up to twice `model_workers` batches per key are in
    flight (one queued behind each running call, so the workers never wait for this thread);
    their rows are in keyed state (`inflight`) until their results are emitted, so a
    checkpoint taken meanwhile handles them again after a restore. A processing-time timer
    `max_wait_ms` after each submission completes what is in flight once no batch came after
    it, so the last batch of a burst is not held. Timers are never deleted: batches and
    retries may share a timestamp, and one key has one timer per timestamp. Transient failures
    wait in keyed state (`retries`) for their retry timer.
    """

    reporting = ScanMetrics(metrics.NO_METRICS)  # until open

    def __init__(self, config: ScanConfig) -> None:
        self.config = config

    def open(self, runtime_context: RuntimeContext) -> None:
        self.retries = runtime_context.get_map_state(
            MapStateDescriptor("retries", Types.STRING(), Types.STRING())
        )
        self.inflight_state = runtime_context.get_state(
            ValueStateDescriptor("inflight", Types.STRING())
        )
        self.inflight: dict[str, deque[InFlight]] = {}
        self.seen: set[str] = set()
        self.workers = ThreadPoolExecutor(self.config.model_workers, "scan-model")
        self.reporting = ScanMetrics(metrics.OperatorMetrics(runtime_context, "scan"))

    def close(self) -> None:
        self.workers.shutdown(wait=True, cancel_futures=True)

    def _scanner(self, name: str) -> Detector:
        return detector(name, intra_op_threads=self.config.onnx_threads, limits=self.config.limits)

    def _handle(
        self, rows: list[tuple[str, str | None, str | None]], now: int, detector: str = ""
    ) -> Handled:
        started = time.monotonic()
        handled = handle_safely(self.config, rows, now, self._scanner, clock=self.config.clock)
        # On a model worker thread: queued, reported by this operator's thread.
        self.reporting.timed(detector, len(rows), time.monotonic() - started)
        return handled

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        now = self.config.clock()
        handled = Handled()
        flying = self._flying(ctx, handled)
        topics, keys, values = list(value[0]), list(value[1]), list(value[2])
        rows = list(zip(topics, keys, values, strict=True))
        drain_at = now + self.config.max_wait_ms
        future = self.workers.submit(self._handle, rows, now, detector_of(ctx.get_current_key()))
        flying.append(InFlight(future, json.dumps([topics, keys, values]), drain_at))
        ctx.timer_service().register_processing_time_timer(drain_at)
        # Oldest first: past the in-flight bound, or already done.
        while len(flying) > 2 * self.config.model_workers or (flying and flying[0].future.done()):
            handled.extend(flying.popleft().future.result())  # waits for its worker
        self._hold(flying)
        yield from self._out(handled, ctx)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Row]:
        handled = Handled()
        flying = self._flying(ctx, handled)
        # Quiet (no batch since this timer's): complete them all, waiting. Busy: only what is
        # done; later batches push the rest out without this thread waiting.
        quiet = bool(flying) and flying[-1].drain_at <= timestamp
        while flying and (quiet or flying[0].future.done()):
            handled.extend(flying.popleft().future.result())
        self._hold(flying)
        due: list[dict[str, Any]] = []
        for request_id, raw in list(self.retries.items()):
            request, at = json.loads(raw)
            if at <= timestamp:
                self.retries.remove(request_id)
                due.append(request)
        if due:
            handled.extend(self._retry(due))
        yield from self._out(handled, ctx)

    def _retry(self, due: list[dict[str, Any]]) -> Handled:
        """Due retries, scanned; if that throws, each alone; one that throws alone is answered
        `error` and dead-lettered `permanent` (never a timer that throws after every restore)."""
        handled = Handled()
        try:
            scan_requests(
                self.config,
                due,
                self.config.clock(),
                handled,
                self._scanner,
                clock=self.config.clock,
            )
            return handled
        except Exception as error:
            LOG.warning("scan: %d retries failed (%s): one at a time", len(due), error_kind(error))
        handled = Handled()
        for request in due:
            one = Handled()
            try:
                scan_requests(
                    self.config,
                    [request],
                    self.config.clock(),
                    one,
                    self._scanner,
                    clock=self.config.clock,
                )
            except Exception as error:
                one = Handled()
                refuse(
                    self.config,
                    request,
                    unforeseen(error),
                    self.config.clock(),
                    one,
                    self._scanner,
                    self.config.clock,
                )
            handled.extend(one)
        return handled

    def _hold(self, flying: deque[InFlight]) -> None:
        """Keyed state = the batches still in flight (one write per call)."""
        if flying:
            self.inflight_state.update("[" + ",".join(f.rows for f in flying) + "]")
        else:
            self.inflight_state.clear()

    def _flying(self, ctx: Any, handled: Handled) -> deque[InFlight]:
        """This key's batches in flight. The first time a key is seen since open(), batches
        a restored checkpoint held in flight (their results were never committed) are
        handled again, here."""
        key = str(ctx.get_current_key())
        if key not in self.seen:
            self.seen.add(key)
            held = self.inflight_state.value()
            if held:
                self.inflight_state.clear()
                for topics, keys, values in json.loads(held):
                    rows = list(zip(topics, keys, values, strict=True))
                    handled.extend(self._handle(rows, self.config.clock()))
        return self.inflight.setdefault(key, deque())

    def _out(self, handled: Handled, ctx: Any) -> Iterator[Row]:
        self.reporting.report(handled, self.config)
        for request, due in handled.retries:
            self.retries.put(request["request_id"], json.dumps([request, due]))
            ctx.timer_service().register_processing_time_timer(due)
        if handled.topics:
            yield Row(handled.topics, handled.keys, handled.values)


# Row(topics[], keys[], values[]): a batch of rows in one Java <-> Python crossing (the
# Batcher's batches of requests, the scan operator's batches of results).
BATCH_ROW = Types.ROW([Types.BASIC_ARRAY(Types.STRING())] * 3)


def build(
    env: StreamExecutionEnvironment,
    source: DataStream,
    sink: Callable[[DataStream], Any],
    config: ScanConfig,
) -> None:
    """source -> [Java] batch per detector -> [Python] scan -> [Java] one row per result -> sink.

    The batching and the split are Java so that Python is entered once per batch, not once per
    request, and the three run chained in one task: the batcher's output is already keyed the
    way PyFlink keys a Python operator (`Row(key)`), so it is reinterpreted as keyed instead of
    shuffled again (docs/BENCHMARKS.md)."""
    gateway = get_gateway()
    flink = gateway.jvm.io.modstream.flink
    j_batches = (
        source._j_data_stream.keyBy(flink.DetectorKey(config.shards), flink.DetectorKey.keyType())
        .process(flink.Batcher(config.max_batch, config.max_wait_ms), flink.Batcher.outputType())
        .name("scan batches")
        .uid("scan_batches")
    )
    utils = gateway.jvm.org.apache.flink.streaming.api.datastream.DataStreamUtils
    j_keyed = utils.reinterpretAsKeyedStream(
        j_batches, gateway.jvm.KeyByKeySelector(), flink.DetectorKey.keyType()
    )
    batches = KeyedStream(j_keyed, BATCH_ROW, DataStream(j_batches))
    scanned = batches.process(Scan(config), output_type=BATCH_ROW).name("scan").uid("scan")
    split = DataStream(
        scanned._j_data_stream.flatMap(flink.Unbatch(), runtime.SINK_ROW.get_java_type_info())
    )
    sink(split.name("scan results").uid("scan_results"))


def main(argv: list[str] | None = None) -> int:
    parser = options()
    args = parser.parse_args(argv)
    modalities = [m.strip() for m in args.modalities.split(",") if m.strip()]
    unknown = sorted(set(modalities) - set(MODALITIES))
    if unknown:
        parser.error(f"unknown modalities: {', '.join(unknown)}")
    settings = Settings.from_env()
    logs.configure_job("scan", settings)
    job = _job_config(args, settings, modalities)
    config = _scan_config(args, job, settings, modalities)
    return runtime.run_on_kafka(
        job,
        settings,
        [f"scan.requests.{m}" for m in modalities],
        lambda env, source, sink: build(env, source, sink, config),
        detached=args.detached,
    )


def options() -> argparse.ArgumentParser:
    """Every job's options (jobs/options.py) and the scan job's own."""
    parser = job_parser("scan", __doc__)
    parser.add_argument("--modalities", default="text,image", help="comma-separated")
    parser.add_argument(
        "--max-batch",
        type=int,
        default=None,
        help="requests per model call (default: 256 for text only, else 4; docs/BENCHMARKS.md)",
    )
    parser.add_argument("--max-wait-ms", type=int, default=20)
    parser.add_argument("--max-attempts", type=int, default=scan.MAX_ATTEMPTS)
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


def _job_config(
    args: argparse.Namespace, settings: Settings, modalities: list[str]
) -> runtime.JobConfig:
    """One job per group of modalities: each its own deployment (checkpoint directory, and with
    it its transactional ids and group)."""
    slug = "-".join(modalities)
    if args.checkpoint_dir is None:
        args.checkpoint_dir = settings.run_dir / "checkpoints" / f"scan-{slug}"
    job = runtime.job_config("scan", args, settings)
    if modalities == ["text"]:
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


def _scan_config(
    args: argparse.Namespace, job: runtime.JobConfig, settings: Settings, modalities: list[str]
) -> ScanConfig:
    """Batch size by modality (large for text, small for media), model workers sharing the
    cores among subtasks, and 8 batching keys per subtask above parallelism 1."""
    return ScanConfig(
        max_batch=args.max_batch or (256 if modalities == ["text"] else 4),
        max_wait_ms=args.max_wait_ms,
        max_attempts=args.max_attempts,
        model_workers=max(1, args.model_workers or (os.cpu_count() or 1) // job.parallelism),
        shards=1 if job.parallelism == 1 else 8 * job.parallelism,
        onnx_threads=max(1, args.onnx_threads),
        media_root=str((args.media_root or settings.media_root).resolve()),
        raw_output_dir=str(args.raw_output_dir.resolve()) if args.raw_output_dir else None,
        limits=Limits.from_env(),
        topics=job.topics,
        keyring=job_keyring("scan", job.bootstrap_servers, job.kafka_properties),
    )


if __name__ == "__main__":
    raise SystemExit(main())
