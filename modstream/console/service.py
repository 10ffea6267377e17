"""The console's I/O: the review feed in Redis, the records on Kafka, the media store.

`Console` is what the web layer calls, one method per thing a reviewer does; each checks the
reviewer's grant (from review.grants records, `Follower`) and lease before it touches anything,
writes the access log (`review.access`), and produces leases and decisions signed with the
reviewer's key from the deployment's keyring, returning only once the broker acknowledged
them (a decision reaches Kafka before the task is acknowledged: modstream/review/queue.py).
"""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from PIL import Image

from modstream.console.evidence import EvidenceItem, access_record, evidence_items
from modstream.console.kept_media import KeptMedia, MediaText
from modstream.console.lead import AccessQuery, ReviewActivity, backlog_rows
from modstream.console.media_text import (
    READERS,
    Moment,
    ReaderResult,
    ReaderResults,
    moment_at,
    moments,
    reader_result,
)
from modstream.console.permissions import (
    Refused,
    admit_grant,
    admit_signed,
    check_decision,
    granted_queues,
    require_grant,
    require_lead,
    require_lease,
)
from modstream.core import topics
from modstream.core.config import kafka_options
from modstream.core.limits import Limits
from modstream.detectors.detector import MediaError
from modstream.detectors.media import IMAGE_FORMATS, read_media
from modstream.review.grants import ReviewGrants
from modstream.review.queue import LEASE_MS, Reviewer, ReviewError, ReviewQueue, Roles
from modstream.trust.keyring import Keyring

log = logging.getLogger("modstream.console")
SEND_TIMEOUT_S = 15.0


class Follower(threading.Thread):
    """Reads one topic from its beginning for as long as the console runs; `ready` is set once
    it has read every record that was there when it started (so grants are known before the
    first page)."""

    def __init__(self, servers: str, topic: str, handle: Callable[[bytes], None]) -> None:
        super().__init__(name=f"console-follow-{topic}", daemon=True)
        self.servers, self.topic, self.handle = servers, topic, handle
        self.ready = threading.Event()
        self.stopping = threading.Event()

    def run(self) -> None:
        consumer = KafkaConsumer(
            bootstrap_servers=self.servers,
            enable_auto_commit=False,
            isolation_level="read_committed",
            **kafka_options(),
        )
        try:
            partitions = [
                TopicPartition(self.topic, p)
                for p in sorted(consumer.partitions_for_topic(self.topic) or [])
            ]
            consumer.assign(partitions)
            consumer.seek_to_beginning(*partitions)
            end = consumer.end_offsets(partitions)
            while not self.stopping.is_set():
                for records in consumer.poll(timeout_ms=500).values():
                    for record in records:
                        self._handle(record.value)
                if not self.ready.is_set() and all(
                    consumer.position(p) >= end[p] for p in partitions
                ):
                    self.ready.set()
        finally:
            consumer.close()

    def _handle(self, value: bytes | None) -> None:
        try:
            if value is not None:
                self.handle(value)
        except Exception:  # one bad record never stops the console; it is logged
            log.exception("console: %s: a record could not be applied", self.topic)


@dataclass
class ConsoleConfig:
    """Where the console reads and writes, and how long a claim holds."""

    bootstrap_servers: str
    redis_url: str
    media_root: Path
    policy: dict[str, Any]
    prefix: str = ""
    lease_ms: int = LEASE_MS
    feed: bool = True  # read review.tasks into the review queue (`modstream review feed`)
    # The scan job's raw-output store (its --raw-output-dir; modstream/detectors/raw_output.py),
    # read for the words OCR read and speech said; None: the task page shows none.
    raw_output_dir: Path | None = None
    keyring: Keyring = field(default_factory=Keyring.from_env)
    limits: Limits = field(default_factory=Limits.from_env)


class Console:
    def __init__(self, config: ConsoleConfig, clock: Callable[[], int]) -> None:
        import redis

        self.config, self.clock = config, clock
        self.redis = redis.Redis.from_url(config.redis_url)
        self.grants = ReviewGrants()
        self._grants_lock = threading.Lock()
        self.producer = KafkaProducer(
            bootstrap_servers=config.bootstrap_servers,
            acks="all",
            max_block_ms=15_000,
            request_timeout_ms=15_000,
            **kafka_options(),
        )
        self.activity = ReviewActivity()  # the lead view's records
        self.readers = ReaderResults()  # the readers' results: where their words are kept
        self.kept = KeptMedia(config.media_root, config.raw_output_dir, config.limits)
        self._readers_lock = threading.Lock()
        # Not waited for by `ready`: the topic is large; until it is read, a page says so.
        self.results_follower = Follower(
            config.bootstrap_servers, self.topic("detector.results"), self._result
        )
        self.followers = [
            Follower(config.bootstrap_servers, self.topic(name), handle)
            for name, handle in (
                ("review.grants", self._grant),
                ("review.tasks", self._task),
                ("review.decisions", self._decision),
                ("review.access", self._access),
            )
        ]

    def topic(self, name: str) -> str:
        return topics.physical(name, self.config.prefix)

    def start(self) -> None:
        """Follow the topics; refuses to start while one the console needs is missing (a
        follower of a missing topic would read nothing and the console show no grant)."""
        consumer = KafkaConsumer(bootstrap_servers=self.config.bootstrap_servers, **kafka_options())
        try:
            present = consumer.topics()
        finally:
            consumer.close()
        wanted = ["review.grants", "review.tasks", "review.leases", "review.decisions"]
        missing = [self.topic(name) for name in [*wanted, "review.access", "detector.results"]]
        missing = [name for name in missing if name not in present]
        if missing:
            raise RuntimeError(
                f"review console: topic(s) {', '.join(missing)} missing on "
                f"{self.config.bootstrap_servers}: run `modstream topics create` first"
            )
        for follower in [*self.followers, self.results_follower]:
            follower.start()

    def stop(self) -> None:
        for follower in [*self.followers, self.results_follower]:
            follower.stopping.set()
        self.producer.close(timeout=10)

    def ready(self) -> bool:
        return all(follower.ready.is_set() for follower in self.followers)

    def _grant(self, raw: bytes) -> None:
        with self._grants_lock:
            refusal = admit_grant(raw, self.config.keyring, self.grants)
        if refusal is not None:
            log.warning("console: grant not applied: %s", refusal)

    def _task(self, raw: bytes) -> None:
        task = json.loads(raw)
        if self.config.feed:
            self.queue().feed(task)
        self.activity.add_task(task)

    def _decision(self, raw: bytes) -> None:
        """A review decision for the lead view, when its signature is one the job accepts."""
        decision, refusal = admit_signed("review.decisions", raw, self.config.keyring)
        if decision is None:
            log.warning("console: review decision not counted: %s", refusal)
            return
        self.activity.add_decision(decision)

    def _access(self, raw: bytes) -> None:
        self.activity.add_access(json.loads(raw))

    def _result(self, raw: bytes) -> None:
        """A reader's result naming its kept words or a time, when the job would accept it
        (schema and signature): a forged result never points a page at another file."""
        record = json.loads(raw)
        if not isinstance(record, dict) or record.get("detector") not in READERS:
            return  # most results: not a reader's, not checked
        admitted, refusal = admit_signed("detector.results", raw, self.config.keyring)
        if admitted is None:
            log.warning("console: detector result not kept: %s", refusal)
            return
        result = reader_result(admitted)
        if result is not None:
            with self._readers_lock:
                self.readers.add(result)

    def queue(self) -> ReviewQueue:
        # ReviewQueue's own grant check reads these roles: the records' grants, none else.
        return ReviewQueue(self.redis, Roles({}), lease_ms=self.config.lease_ms)

    def send(self, name: str, key: str, record: dict[str, Any]) -> None:
        """Produce and wait for the broker's acknowledgement (raises what it refused)."""
        value = json.dumps(record).encode("utf-8")
        future = self.producer.send(self.topic(name), key=key.encode("utf-8"), value=value)
        self.producer.flush(timeout=SEND_TIMEOUT_S)
        future.get(timeout=SEND_TIMEOUT_S)

    def audit(
        self, reviewer_id: str, action: str, task: dict[str, Any] | None = None, **extra: Any
    ) -> None:
        self.send(
            "review.access",
            reviewer_id,
            access_record(reviewer_id, action, self.clock(), task, **extra),
        )

    def signer(self, reviewer_id: str) -> Reviewer:
        key = self.config.keyring.key_for(reviewer_id, "reviewer")
        if key is None:
            raise Refused(f"reviewer {reviewer_id} has no signing key in this deployment")
        return Reviewer(reviewer_id, key)

    def _roles(self, reviewer_id: str, now: int) -> Roles:
        return Roles({reviewer_id: sorted(self.grants.queues_at(reviewer_id, now))})

    def queues(self, reviewer_id: str) -> list[dict[str, Any]]:
        """The reviewer's granted queues that have tasks: name, depth, oldest wait."""
        now = self.clock()
        backlog = self.queue().backlog(now)
        names = granted_queues(self.grants, reviewer_id, backlog, now)
        return [{"queue": name, **backlog[name]} for name in names]

    def claim(self, reviewer_id: str, queue: str) -> dict[str, Any] | None:
        """The queue's most urgent task under a lease produced to review.leases; None: empty."""
        now = self.clock()
        self._require_grant(reviewer_id, queue, now, None)
        review = ReviewQueue(
            self.redis, self._roles(reviewer_id, now), lease_ms=self.config.lease_ms
        )
        signer = self.signer(reviewer_id)
        lease = self._sender("review.leases")
        try:
            task = review.claim(queue, signer, now, lease)
        except ReviewError as error:
            raise Refused(str(error)) from None
        if task is not None:
            self.audit(reviewer_id, "claim", task)
        return task

    def task(self, reviewer_id: str, task_id: str) -> dict[str, Any]:
        """The task, for the reviewer holding its lease under a grant of its queue."""
        try:
            task = self.queue().task(task_id)
        except ReviewError as error:
            raise Refused(str(error)) from None
        self._require_grant(reviewer_id, task["queue"], self.clock(), task)
        held: dict[bytes, bytes] = self.redis.hgetall(f"review:lease:{task_id}")  # type: ignore[assignment]
        lease = {key.decode(): value.decode() for key, value in held.items()}
        try:
            require_lease(lease, reviewer_id, task_id)
        except Refused as refused:
            self.audit(reviewer_id, "refused", task, detail=str(refused))
            raise
        return task

    def _require_grant(
        self, reviewer_id: str, queue: str, now: int, task: dict[str, Any] | None
    ) -> None:
        try:
            require_grant(self.grants, reviewer_id, queue, now)
        except Refused as refused:
            self.audit(reviewer_id, "refused", task, queue=queue, detail=str(refused))
            raise

    def view(self, reviewer_id: str, task_id: str) -> tuple[dict[str, Any], list[EvidenceItem]]:
        task = self.task(reviewer_id, task_id)
        self.audit(reviewer_id, "view", task)
        return task, evidence_items(task)

    def _reader_results(self, task: dict[str, Any]) -> list[ReaderResult]:
        with self._readers_lock:
            return self.readers.of(str(task["content_id"]), int(task["content_version"]))

    def media_text(self, reviewer_id: str, task_id: str) -> MediaText:
        """The words the version's readers kept, read from the raw-output store on the server
        (each file read is logged, `raw_output`), and the video moments of their findings."""
        task = self.task(reviewer_id, task_id)
        shown = self.kept.media_text(
            self._reader_results(task), [str(ref) for ref in task.get("evidence") or []],
            complete=self.results_follower.ready.is_set(),
        )  # fmt: skip
        for ref in shown.read:
            self.audit(reviewer_id, "raw_output", task, evidence_ref=ref)
        return shown

    def _moment(self, task: dict[str, Any], index: int, at_ms: int) -> Moment:
        evidence = [str(ref) for ref in task.get("evidence") or []]
        moment = moment_at(moments(self._reader_results(task), evidence), index, at_ms)
        if moment is None:
            raise Refused(f"task {task['task_id']}: no finding at {at_ms} ms of evidence {index}")
        return moment

    def frame(self, reviewer_id: str, task_id: str, index: int, at_ms: int) -> tuple[bytes, str]:
        """The video frame at a reader's finding, rendered by the server as a PNG (the video
        read with the scan job's hostile-media checks and decoding bounds)."""
        task = self.task(reviewer_id, task_id)
        moment = self._moment(task, index, at_ms)
        try:
            png = self.kept.frame(moment)
        except (MediaError, OSError) as error:
            raise Refused(f"task {task_id}: no frame at {at_ms} ms ({error})") from None
        self.audit(reviewer_id, "evidence", task, evidence_ref=moment.fragment_ref)
        return png, "image/png"

    def reveal_frame(self, reviewer_id: str, task_id: str, index: int, at_ms: int) -> None:
        task = self.task(reviewer_id, task_id)
        moment = self._moment(task, index, at_ms)
        self.audit(reviewer_id, "reveal", task, evidence_ref=moment.fragment_ref)

    def evidence(self, reviewer_id: str, task_id: str, index: int) -> tuple[bytes, str]:
        """An image of the task's evidence from the media store, and its media type."""
        task = self.task(reviewer_id, task_id)
        item = self._item(task, index)
        try:
            data = read_media(item.ref, self.config.media_root, self.config.limits)
            with Image.open(io.BytesIO(data), formats=IMAGE_FORMATS) as image:
                mime = Image.MIME[str(image.format)]
        except (MediaError, OSError) as error:
            raise Refused(f"evidence {index} of task {task_id} cannot be shown ({error})") from None
        self.audit(reviewer_id, "evidence", task, evidence_ref=item.ref)
        return data, mime

    def reveal(self, reviewer_id: str, task_id: str, index: int) -> None:
        task = self.task(reviewer_id, task_id)
        self.audit(reviewer_id, "reveal", task, evidence_ref=self._item(task, index).ref)

    def _item(self, task: dict[str, Any], index: int) -> EvidenceItem:
        items = [item for item in evidence_items(task) if item.index == index and item.image]
        if not items:
            raise Refused(f"task {task['task_id']} has no image evidence {index}")
        return items[0]

    def decide(
        self, reviewer_id: str, task_id: str, outcome: str, reason: str, note: str
    ) -> dict[str, Any]:
        """The signed decision, on review.decisions once the broker acknowledged it."""
        task = self.task(reviewer_id, task_id)
        check_decision(outcome, reason, self.reason_codes())
        now = self.clock()
        review = ReviewQueue(
            self.redis, self._roles(reviewer_id, now), lease_ms=self.config.lease_ms
        )
        try:
            record = review.decide(
                task_id, self.signer(reviewer_id), outcome, reason, now,
                self._sender("review.decisions"), self._sender("review.leases"),
            )  # fmt: skip
        except ReviewError as error:
            raise Refused(str(error)) from None
        self.audit(reviewer_id, "decide", task, outcome=outcome, note=note[:4096])
        return record

    def lead_view(self, lead_id: str, leads: frozenset[str], query: AccessQuery) -> dict[str, Any]:
        """Every queue's backlog, throughput, agreement and the access search, for a lead
        (`leads`: the accounts file's); the look itself goes to the access log."""
        try:
            require_lead(leads, lead_id)
        except Refused as refused:
            self.audit(lead_id, "refused", detail=str(refused))
            raise
        now = self.clock()
        self.audit(lead_id, "lead_view", detail=query.described())
        figures = self.activity.view(now, query, self.grants.may)
        return {"queues": backlog_rows(self.queue().backlog(now)), **figures}

    def reason_codes(self) -> list[str]:
        from modstream.console.permissions import reason_codes

        return reason_codes(self.config.policy)

    def notices(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in (self.config.policy.get("notices") or {}).items()}

    def _sender(self, name: str) -> Callable[[dict[str, Any]], None]:
        return lambda record: self.send(name, str(record["content_id"]), record)
