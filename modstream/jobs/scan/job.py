"""scan: scan requests of some modalities -> detectors on ONNX Runtime -> detector.results.

One scan job per modality pool (`--pool image=image`; deploy/k8s), or several pools in one job
(`--pool text=text --pool image=image --pool av=video,audio`, the default; the local demo), so
expensive media never starve cheap text: each pool has its own source and Kafka group, batcher,
admission queue and model workers. A pool reads its modalities' live and backfill topics and
serves live first (modstream/scanning/admission.py): what it cannot answer by a request's deadline
is answered `timeout` at once.
Requests are keyed by detector and batched dynamically by a Java operator (flush at
`--max-batch` requests or `--max-wait-ms` after the first one), so Python is entered once per
batch; within a batch live goes before backfill; one `session.run` per batch and detector
(modstream/detectors/scan.py), in a worker thread while the operator prepares the next batch.
Transient media-load failures are retried per request on processing-time timers with backoff and
jitter, up to a maximum of attempts and the request's deadline, then answered `timeout`; corrupt,
unsupported or hostile media (a reference outside `--media-root`, a device, a FIFO, more bytes than
declared; modstream/detectors/media.py) is answered `error` plus a DLQ record of class `permanent`,
and so is a request whose handling throws anything else: one record never stops the job, and a batch
restored from a checkpoint that fails again fails per request. Results and DLQ rows go through one
exactly-once sink.

This module is the wiring and the Flink adapter (`Scan`); what happens to a batch's rows
(decoding, media loading, model calls, results, DLQ rows, retries) is modstream/scanning/batch.py.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pyflink.common import Row, Types
from pyflink.datastream import DataStream, KeyedStream, StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedBroadcastProcessFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor
from pyflink.java_gateway import get_gateway

from modstream.core import logs
from modstream.core.config import Settings
from modstream.detectors.detector import Detector
from modstream.detectors.registry import detector
from modstream.jobs import metrics, runtime
from modstream.jobs.scan import config as scan_config
from modstream.jobs.scan.config import ScanConfig
from modstream.jobs.scan.metrics import ScanMetrics, detector_of
from modstream.jobs.scan.state import (
    ArrivalRows,
    Row3,
    arrival_order,
    record_times,
    restored,
    stored,
)
from modstream.scanning.admission import (
    AdmissionQueue,
    Capacity,
    Waiting,
    admission_fields,
    reported_version,
)
from modstream.scanning.batch import Handled, answer_timeout, handle_safely, retry_safely
from modstream.scanning.pools import REPORTS

LOG = logging.getLogger("modstream.scan")


@dataclass
class InFlight:
    future: Future[Handled]
    rows: str  # the batch as JSON [topics, keys, values], for keyed state
    size: int = 0


class Scan(KeyedBroadcastProcessFunction):
    """Batches from the Java `Batcher` (keyed by detector) through the detectors. Emits one
    `Row(topics[], keys[], values[])` per batch, split for the sink by the Java `Unbatch`.
    Its broadcast input is `moderation.reports`: a report bumps its version's waiting requests
    in every queue of the subtask (a version's requests are spread over detector keys).

    A batch is handled whole (validation, media loading, one model call per detector, result
    records) by one of `model_workers` threads; ONNX Runtime releases the GIL and each call
    uses `onnx_threads` intra-op threads (docs/BENCHMARKS.md: on 2 cores two callers with one
    thread each outscore one caller with two). This thread never waits for a worker: it reads,
    admits, refuses, hands batches over and emits the finished ones in arrival order, so the
    pool reads its topics as fast as they come and requests wait where admission sees them
    (docs/scanning.md, "Admission": when it waited here for a busy worker, requests piled up
    in Kafka instead). Up to twice `model_workers` batches per key are in flight (one queued
    behind each running call, so a worker that finishes has the next at once); their rows are
    in keyed state (`inflight`) until their results are emitted, so a checkpoint taken
    meanwhile handles them again after a restore. While anything is in flight or waiting, a
    processing-time timer every `max_wait_ms` collects what the workers finished and hands
    them more. Timers are never deleted: batches and retries may share a timestamp, and one
    key has one timer per timestamp. Transient failures wait in keyed state (`retries`) for
    their retry timer.

    Admission (issue 28 item 7, modstream/scanning/admission.py): requests wait in a priority queue
    per key (live high-risk, live, backfill), not in Kafka; a batch is handed to a worker only
    while fewer than twice the workers' batches are in flight, highest class first; what the
    pool cannot answer before its deadline, counted from the request's Kafka record timestamp
    (the Batcher's `arrivals[]`), is answered `timeout` at once. Waiting rows and when they
    arrived are in keyed state (`waiting`, one entry per arrival) so a restore admits them
    again with what is left of their budget.
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
        self.waiting_state = runtime_context.get_map_state(
            MapStateDescriptor("waiting", Types.STRING(), Types.STRING())
        )
        self.inflight: dict[str, deque[InFlight]] = {}
        self.timer_at: dict[str, int] = {}  # per key: its pending collecting timer
        self.queues: dict[str, AdmissionQueue] = {}
        self.capacities: dict[str, Capacity] = {}
        # Per key: arrival id -> {row index: (row, arrived ms)} still waiting (mirrors `waiting`).
        self.arrivals: dict[str, dict[str, ArrivalRows]] = {}
        self.sequence = itertools.count()
        self.reported_at = 0
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
        seconds = time.monotonic() - started
        self.reporting.timed(detector, len(rows), seconds)
        self._capacity(detector).observe(len(rows), seconds)
        return handled

    def _capacity(self, detector: str) -> Capacity:
        """One detector's capacity in this subtask, shared by its batching keys."""
        if detector not in self.capacities:
            self.capacities[detector] = Capacity(
                rps=self.config.capacity_rps, workers=self.config.model_workers
            )
        return self.capacities[detector]

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        now = self.config.clock()
        handled = Handled()
        flying = self._flying(ctx, handled)
        rows = list(zip(list(value[0]), list(value[1]), list(value[2]), strict=True))
        handled.extend(self._admit(ctx, rows, now, record_times(value, len(rows))))
        handled.extend(self._dispatch(ctx, flying, now))
        yield from self._out(handled, ctx)

    def process_broadcast_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        """A report (`Row(topic, key, value, ...)` of moderation.reports): its version's
        waiting requests go to the front of every queue here (`AdmissionQueue.bump`). Kept in
        memory only: after a restore they wait in their own class again. A report that does
        not decode is skipped (the moderation job dead-letters it)."""
        reported = reported_version(value[2])
        if reported is not None:
            moved = sum(queue.bump(*reported) for queue in self.queues.values())
            if moved:
                self.reporting.reporter.inc("scan_bumped", moved)
        yield from ()

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Row]:
        handled = Handled()
        flying = self._flying(ctx, handled)
        handled.extend(self._dispatch(ctx, flying, self.config.clock()))
        due: list[dict[str, Any]] = []
        for request_id, raw in list(self.retries.items()):
            request, at = json.loads(raw)
            if at <= timestamp:
                self.retries.remove(request_id)
                due.append(request)
        if due:
            handled.extend(retry_safely(self.config, due, self._scanner, self.config.clock))
        yield from self._out(handled, ctx)

    def _admit(self, ctx: Any, rows: list[Row3], now: int, recorded: list[int | None]) -> Handled:
        """Each row offered to the key's queue, its budget counted from its Kafka record time
        (`recorded`); the refused and those pushed out are answered `timeout` at once; rows
        admission cannot read go to the DLQ (`handle_safely`: no model call for them)."""
        key = str(ctx.get_current_key())
        queue = self._queue(key)
        arrival = f"{now}-{next(self.sequence)}"
        kept: ArrivalRows = {}
        shed: list[Waiting] = []
        unreadable: list[Row3] = []
        for index, (row, record_ms) in enumerate(zip(rows, recorded, strict=True)):
            waiting = admission_fields(row, next(self.sequence), now, arrival, index, record_ms)
            if waiting is None:
                unreadable.append(row)
                continue
            refused = queue.offer(waiting, now)
            kept[index] = (row, waiting.arrived_ms)
            for gone in refused:  # this row, or rows it pushed out (of this arrival too)
                if gone.row[0] == arrival:
                    kept.pop(gone.row[1], None)
            shed += refused
        if kept:
            self.arrivals.setdefault(key, {})[arrival] = kept
            self.waiting_state.put(arrival, stored(kept))
        handled = self._shed(key, shed, now)
        if unreadable:
            handled.extend(handle_safely(self.config, unreadable, now, self._scanner))
        return handled

    def _dispatch(self, ctx: Any, flying: deque[InFlight], now: int) -> Handled:
        """The batches done, in arrival order; what can no longer be answered in time, shed;
        then the queue's best requests to the workers while fewer than twice the workers'
        batches fly. Does not wait for a worker, so a busy pool keeps reading and refusing and
        the next timer or batch collects what finishes; except with `max_waiting` requests
        already waiting (a backlog with long budgets), when it waits for the oldest batch in
        flight, so a backlog waits in Kafka rather than in memory and reading never starves the
        workers. One collecting timer per key is pending at a time; `inflight` state is
        written only when the batches in flight changed."""
        key = str(ctx.get_current_key())
        queue = self._queue(key)
        handled = Handled()
        changed = False
        while flying and flying[0].future.done():
            handled.extend(flying.popleft().future.result())
            changed = True
        queue.in_flight = sum(f.size for f in flying)
        handled.extend(self._shed(key, queue.expire(now), now))
        detector = detector_of(ctx.get_current_key())
        while len(queue):
            if len(flying) >= 2 * self.config.model_workers:
                if len(queue) < self.config.waiting_bound:
                    break
                handled.extend(flying.popleft().future.result())  # waits for its worker
                changed = True
                now = self.config.clock()
            queue.in_flight = sum(f.size for f in flying)
            taken, shed = queue.take(self.config.max_batch, now)
            handled.extend(self._shed(key, shed, now))
            if not taken:
                break
            rows = [w.row[2] for w in taken]
            self._release(key, taken)
            self._submit(flying, rows, now, detector)
            changed = True
        queue.in_flight = sum(f.size for f in flying)
        if (flying or len(queue)) and self.timer_at.get(key, 0) <= now:
            self.timer_at[key] = now + self.config.max_wait_ms
            ctx.timer_service().register_processing_time_timer(self.timer_at[key])
        if changed:
            self._hold(flying)
        return handled

    def _submit(self, flying: deque[InFlight], rows: list[Row3], now: int, detector: str) -> None:
        """A batch to the model workers, held in flight (and in `inflight` state) until emitted."""
        topics, keys, values = (list(column) for column in zip(*rows, strict=True))
        future = self.workers.submit(self._handle, rows, now, detector)
        flying.append(InFlight(future, json.dumps([topics, keys, values]), len(rows)))

    def _shed(self, key: str, shed: list[Waiting], now: int) -> Handled:
        """Requests the pool cannot answer in time: `timeout` now, counted by class."""
        if not shed:
            return Handled()
        self._release(key, shed)
        for waiting in shed:
            self.reporting.reporter.inc(
                "scan_shed", modality=waiting.modality, priority=waiting.priority
            )
        return answer_timeout(self.config, [w.row[2] for w in shed], now, self._scanner)

    def _release(self, key: str, gone: list[Waiting]) -> None:
        """Rows no longer waiting: out of the key's arrivals and their keyed state."""
        arrivals = self.arrivals.get(key, {})
        touched: set[str] = set()
        for waiting in gone:
            arrival, index, _ = waiting.row
            if index in arrivals.get(arrival, {}):
                del arrivals[arrival][index]
                touched.add(arrival)
        for arrival in touched:
            rows = arrivals[arrival]
            if rows:
                self.waiting_state.put(arrival, stored(rows))
            else:
                del arrivals[arrival]
                self.waiting_state.remove(arrival)

    def _queue(self, key: str) -> AdmissionQueue:
        if key not in self.queues:
            self.queues[key] = AdmissionQueue(self._capacity(detector_of(key)))
        return self.queues[key]

    def _report_waiting(self, now: int) -> None:
        """The oldest waiting request's age per modality and priority in this subtask (0 once
        none waits), at most every `metrics_every_ms`."""
        if now - self.reported_at < self.config.metrics_every_ms:
            return
        self.reported_at = now
        oldest: dict[tuple[str, str], int] = dict.fromkeys(self.reporting.waiting_seen, 0)
        for queue in self.queues.values():
            for slot, age in queue.oldest_age_ms(now).items():
                oldest[slot] = max(oldest.get(slot, 0), age)
        for (modality, priority), age in oldest.items():
            self.reporting.waiting(modality, priority, age)

    def _hold(self, flying: deque[InFlight]) -> None:
        """Keyed state = the batches still in flight (one write per call)."""
        if flying:
            self.inflight_state.update("[" + ",".join(f.rows for f in flying) + "]")
        else:
            self.inflight_state.clear()

    def _flying(self, ctx: Any, handled: Handled) -> deque[InFlight]:
        """This key's batches in flight. The first time a key is seen since open(), batches
        a restored checkpoint held in flight (their results were never committed) go to the
        workers again, and the requests it held waiting are admitted again with what is left
        of their budget (the state keeps when each arrived)."""
        key = str(ctx.get_current_key())
        flying = self.inflight.setdefault(key, deque())
        if key not in self.seen:
            self.seen.add(key)
            held = self.inflight_state.value()
            if held:
                for topics, keys, values in json.loads(held):
                    rows = list(zip(topics, keys, values, strict=True))
                    self._submit(flying, rows, self.config.clock(), detector_of(key))
            entries = list(self.waiting_state.items())
            if entries:
                self.waiting_state.clear()
                # Admitted again arrival by arrival (each at most a batch), oldest first: one
                # entry of every row would be rewritten whole at each dispatch.
                for _, raw in sorted(entries, key=lambda entry: arrival_order(entry[0])):
                    rows, arrived = restored(raw)
                    handled.extend(self._admit(ctx, rows, self.config.clock(), arrived))
        return flying

    def _out(self, handled: Handled, ctx: Any) -> Iterator[Row]:
        self.reporting.report(handled, self.config)
        self._report_waiting(self.config.clock())
        for request, due in handled.retries:
            self.retries.put(request["request_id"], json.dumps([request, due]))
            ctx.timer_service().register_processing_time_timer(due)
        if handled.topics:
            yield Row(handled.topics, handled.keys, handled.values)


# Row(topics[], keys[], values[]): a batch of rows in one Java <-> Python crossing (the scan
# operator's batches of results); the Batcher's batches of requests add arrivals[] (each
# request's Kafka record timestamp, epoch ms as text, for admission).
BATCH_ROW = Types.ROW([Types.BASIC_ARRAY(Types.STRING())] * 3)
REQUEST_BATCH_ROW = Types.ROW([Types.BASIC_ARRAY(Types.STRING())] * 4)
# The broadcast state of the reports input: unused (a bump acts on the queues in memory), but
# PyFlink's broadcast needs a descriptor.
REPORTS_STATE = MapStateDescriptor("scan_reports", Types.STRING(), Types.STRING())


def build(
    env: StreamExecutionEnvironment,
    source: DataStream,
    sink: Callable[[DataStream], Any],
    config: ScanConfig,
    pool: str = "",
) -> None:
    """source -> [Java] batch per detector -> [Python] scan -> [Java] one row per result -> sink;
    the source's `moderation.reports` rows, split off in Java, are broadcast to the scan
    operator (report bumps, docs/scanning.md "Reports").

    The batching and the split are Java so that Python is entered once per batch, not once per
    request, and the three run chained in one task: the batcher's output is already keyed the
    way PyFlink keys a Python operator (`Row(key)`), so it is reinterpreted as keyed instead of
    shuffled again (docs/BENCHMARKS.md). `pool`: the suffix of the operators' uids when one job
    runs several pools (none for a job of one pool, so its savepoints keep their uids)."""
    suffix = f"_{pool}" if pool else ""
    gateway = get_gateway()
    flink = gateway.jvm.io.modstream.flink
    reports_topic = config.physical(REPORTS)
    j_reports = source._j_data_stream.filter(flink.TopicFilter(reports_topic, True))
    j_requests = source._j_data_stream.filter(flink.TopicFilter(reports_topic, False))
    # The two filters hold no state, so no uid: nothing of theirs is restored, and the
    # workflow's fingerprint (modstream/ops/workflow.py: the jobs' uids) keeps to what decides.
    reports = DataStream(j_reports.name(f"scan reports{suffix}"))
    j_batches = (
        j_requests.name(f"scan requests{suffix}")
        .keyBy(flink.DetectorKey(config.shards), flink.DetectorKey.keyType())
        .process(flink.Batcher(config.max_batch, config.max_wait_ms), flink.Batcher.outputType())
        .name(f"scan batches{suffix}")
        .uid("scan_batches" + suffix)
    )
    utils = gateway.jvm.org.apache.flink.streaming.api.datastream.DataStreamUtils
    j_keyed = utils.reinterpretAsKeyedStream(
        j_batches, gateway.jvm.KeyByKeySelector(), flink.DetectorKey.keyType()
    )
    batches = KeyedStream(j_keyed, REQUEST_BATCH_ROW, DataStream(j_batches))
    scanned = (
        batches.connect(reports.broadcast(REPORTS_STATE))
        .process(Scan(config), output_type=BATCH_ROW)
        .name(f"scan{suffix}")
        .uid("scan" + suffix)
    )
    split = DataStream(
        scanned._j_data_stream.flatMap(flink.Unbatch(), runtime.SINK_ROW.get_java_type_info())
    )
    sink(split.name(f"scan results{suffix}").uid("scan_results" + suffix))


def main(argv: list[str] | None = None) -> int:
    parser = scan_config.options()
    args = parser.parse_args(argv)
    try:
        pools = scan_config.pools_from(args)
    except ValueError as error:
        parser.error(str(error))
    settings = Settings.from_env()
    logs.configure_job("scan", settings)
    job = scan_config.deployment_config(args, settings, pools)
    configs = {pool.name: scan_config.pool_config(args, job, settings, pool) for pool in pools}
    if len(pools) == 1:
        [pool] = pools
        return runtime.run_on_kafka(
            job,
            settings,
            pool.topics(),
            lambda env, source, sink: build(env, source, sink, configs[pool.name]),
            detached=args.detached,
        )
    return scan_config.run_pools(job, settings, pools, configs, build, detached=args.detached)


if __name__ == "__main__":
    raise SystemExit(main())
