"""scan: scan requests of some modalities -> detectors on ONNX Runtime -> detector.results.

Run one scan job per group of modalities (`--modalities text`, `--modalities image,video`), so
expensive media never starve cheap text: each job has its own source, slots and sessions.
Requests are keyed by detector and batched dynamically (flush at `--max-batch` requests or
`--max-wait-ms` after the first one, live before backfill); one `session.run` per batch
(udfs/scan.py). Transient media-load failures are retried per request on processing-time
timers with backoff and jitter, up to a maximum of attempts and the request's deadline, then
answered `timeout`; corrupt or unsupported media is answered `error` plus a DLQ record of class
`permanent`. Results and DLQ rows go through one exactly-once sink.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from pyflink.common import Row, Types
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor

from jobs import runtime
from modstream.config import Settings
from schemas import SchemaError, dead_letter, parse
from udfs import scan
from udfs.detector import Item, MediaError
from udfs.registry import detector

MODALITIES = ("text", "image", "video", "audio")


@dataclass(frozen=True, kw_only=True)
class ScanConfig(runtime.TopicNames):
    max_batch: int = 32
    max_wait_ms: int = 20
    max_attempts: int = scan.MAX_ATTEMPTS


def load_media(request: dict[str, Any]) -> Item:
    """The request's text, or its `file://` media (other schemes: a MediaError)."""
    if request.get("text") is not None:
        return Item(text=request["text"], mime_type=request.get("mime_type"))
    ref = request.get("media_ref")
    if not ref:
        raise MediaError("no text and no media_ref")
    parsed = urlparse(ref)
    if parsed.scheme != "file":
        raise MediaError(f"unsupported media_ref scheme {parsed.scheme!r}")
    data = Path(unquote(parsed.path)).read_bytes()  # OSError: transient, retried
    return Item(
        data=data,
        mime_type=request.get("mime_type"),
        ref=ref,
        segment=request.get("segment_id"),
        segments=int(request.get("segments") or 1),
    )


class Batch(KeyedProcessFunction):
    """Keyed by detector: buffers requests, flushes a batch through the detector."""

    def __init__(self, config: ScanConfig) -> None:
        self.config = config

    def open(self, runtime_context: RuntimeContext) -> None:
        self.pending = runtime_context.get_map_state(
            MapStateDescriptor("pending", Types.STRING(), Types.STRING())
        )
        # Requests buffered per key, counted in memory (the durable buffer is `pending`; after
        # a restore its processing-time timer flushes whatever it holds).
        self.counts: dict[str, int] = {}
        self.sequence = 0
        self.retries = runtime_context.get_map_state(
            MapStateDescriptor("retries", Types.STRING(), Types.STRING())
        )

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        physical, raw = value[0], value[2]
        topic = self.config.contract(physical)
        try:
            parse(topic, raw or "")  # validated once; the raw JSON is what is buffered
        except SchemaError as error:
            letter = dead_letter(physical, value[1], raw, error, ts=value[3] or 0, operator="scan")
            yield Row(self.config.physical("moderation.dlq"), value[1], letter.model_dump_json())
            return
        yield from self._add(raw, ctx)

    def _add(self, raw: str, ctx: Any) -> Iterator[Row]:
        key = str(ctx.get_current_key())
        self.sequence += 1
        self.pending.put(f"{_now():013d}-{self.sequence:09d}", raw)
        count = self.counts.get(key, 0) + 1
        if count >= self.config.max_batch:
            self.counts[key] = 0
            yield from self._flush(ctx)
            return
        if count == 1:
            ctx.timer_service().register_processing_time_timer(_now() + self.config.max_wait_ms)
        self.counts[key] = count

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Row]:
        for key, raw in list(self.retries.items()):
            request, due = json.loads(raw)
            if due <= timestamp:
                self.retries.remove(key)
                yield from self._add(json.dumps(request), ctx)
        self.counts[str(ctx.get_current_key())] = 0
        if not self.pending.is_empty():
            yield from self._flush(ctx)

    def _flush(self, ctx: Any) -> Iterator[Row]:
        entries = list(self.pending.items())
        self.pending.clear()
        requests = scan.order([json.loads(raw) for _, raw in entries])
        try:
            scanner = detector(str(ctx.get_current_key()))
        except KeyError as error:  # a policy requires a detector this job does not serve
            outcome = scan.ScanOutcome(permanent=[(r, str(error)) for r in requests])
        else:
            outcome = scan.scan_batch(
                scanner, requests, load_media, _now(), max_attempts=self.config.max_attempts
            )
        for request, due in outcome.retries:
            self.retries.put(request["request_id"], json.dumps([request, due]))
            ctx.timer_service().register_processing_time_timer(due)
        for record in outcome.results:
            yield Row(
                self.config.physical("detector.results"),
                record["content_id"],
                json.dumps(record, separators=(",", ":")),
            )
        for request, why in outcome.permanent:
            letter = dead_letter(
                self.config.physical(f"scan.requests.{request['modality']}"),
                request["content_id"],
                json.dumps({k: v for k, v in request.items() if k != "text"}),
                f"scan: {request['detector']} cannot scan this media ({why})",
                ts=request["ts"],
                error_class="permanent",
                attempts=int(request.get("attempt", 1)),
                operator="scan",
            )
            yield Row(
                self.config.physical("moderation.dlq"),
                request["content_id"],
                letter.model_dump_json(),
            )


def _now() -> int:
    return int(time.time() * 1000)


def build(
    env: StreamExecutionEnvironment,
    source: DataStream,
    sink: Callable[[DataStream], Any],
    config: ScanConfig,
) -> None:
    scanned = (
        source.key_by(_detector_of, key_type=Types.STRING())
        .process(Batch(config), output_type=runtime.SINK_ROW)
        .name("scan")
        .uid("scan")
    )
    sink(scanned)


def _detector_of(row: Row) -> str:
    """The detector named in the request (cheap: no full decode); unparseable rows go to a
    key of their own and are dead-lettered there."""
    raw = row[2] or ""
    marker = raw.find('"detector":"')
    if marker < 0:
        try:
            return str(json.loads(raw).get("detector") or "_invalid")
        except (ValueError, AttributeError):
            return "_invalid"
    start = marker + len('"detector":"')
    return raw[start : raw.find('"', start)]


def main(argv: list[str] | None = None) -> int:
    parser = runtime.job_parser("scan", __doc__)
    parser.add_argument("--modalities", default="text,image", help="comma-separated")
    parser.add_argument(
        "--max-batch",
        type=int,
        default=None,
        help="requests per model call (default: 256 for text only, else 8; docs/BENCHMARKS.md)",
    )
    parser.add_argument("--max-wait-ms", type=int, default=20)
    parser.add_argument("--max-attempts", type=int, default=scan.MAX_ATTEMPTS)
    args = parser.parse_args(argv)
    modalities = [m.strip() for m in args.modalities.split(",") if m.strip()]
    unknown = sorted(set(modalities) - set(MODALITIES))
    if unknown:
        parser.error(f"unknown modalities: {', '.join(unknown)}")
    settings = Settings.from_env()
    # One job per group of modalities: each needs its own transactional ids and group.
    slug = "-".join(modalities)
    if args.transactional_id_prefix == "modstream-scan":
        args.transactional_id_prefix = f"modstream-scan-{slug}"
    if args.group_id == "modstream-scan":
        args.group_id = f"modstream-scan-{slug}"
    if args.checkpoint_dir is None:
        args.checkpoint_dir = settings.run_dir / "checkpoints" / f"scan-{slug}"
    job = runtime.job_config("scan", args, settings)
    if modalities != ["text"]:
        # A backlog of slow records (tens of ms each) would hold checkpoint barriers back and,
        # with them, every commit of the exactly-once sink: let barriers overtake buffers.
        job = dataclasses.replace(
            job,
            flink_conf={
                "execution.checkpointing.unaligned.enabled": "true",
                "taskmanager.network.memory.buffer-debloat.enabled": "true",
            },
        )
    max_batch = args.max_batch or (256 if modalities == ["text"] else 8)
    config = ScanConfig(
        max_batch=max_batch,
        max_wait_ms=args.max_wait_ms,
        max_attempts=args.max_attempts,
        topics=job.topics,
    )
    return runtime.run_on_kafka(
        job,
        settings,
        [f"scan.requests.{m}" for m in modalities],
        lambda env, source, sink: build(env, source, sink, config),
        detached=args.detached,
    )


if __name__ == "__main__":
    raise SystemExit(main())
