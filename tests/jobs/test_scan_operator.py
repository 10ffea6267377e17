"""The scan job's Python operator with small fakes of state, timers and detectors: no JVM.

Batches go to model worker threads and come back in arrival order; what is in flight is in
keyed state (and handled again after a restore); a quiet timer completes everything, a timer
while batches keep coming waits for nothing."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from pyflink.common import Row

import modstream.jobs.scan.job
from modstream.detectors.detector import Item, MediaError
from modstream.jobs.scan.job import Scan, ScanConfig
from modstream.testing.flink import FakeMapState, FakeValueState
from modstream.testing.records import T0
from modstream.testing.scans import request

TOPIC = "scan.requests.text"


class Gated:
    """A text detector whose calls wait until `release` is set."""

    name = "offensive_text"
    model_version = "gated-1"
    modalities = ("text",)
    labels = ("offensive",)

    def __init__(self) -> None:
        self.release = threading.Event()

    def detect(self, items: Sequence[Item]) -> list[dict[str, float] | MediaError]:
        if not self.release.wait(timeout=10):
            raise AssertionError("the detector was never released")
        return [{"offensive": 0.5} for _ in items]


class Runtime:
    def __init__(self) -> None:
        self.states: dict[str, Any] = {}

    def get_state(self, descriptor: Any) -> FakeValueState:
        return self.states.setdefault(descriptor.name, FakeValueState())

    def get_map_state(self, descriptor: Any) -> FakeMapState:
        return self.states.setdefault(descriptor.name, FakeMapState())


class Timers:
    def __init__(self) -> None:
        self.registered: list[int] = []

    def register_processing_time_timer(self, ts: int) -> None:
        self.registered.append(ts)


class Context:
    def __init__(self) -> None:
        self.timers = Timers()

    def get_current_key(self) -> str:
        return "offensive_text"

    def timer_service(self) -> Timers:
        return self.timers


def batch(*indexes: int) -> Row:
    """Text requests `index` for content `c-index`, as the Java Batcher hands them over."""
    values = [json.dumps(request(str(i), f"text {i}")) for i in indexes]
    return Row([TOPIC] * len(indexes), [f"c-{i}" for i in indexes], values)


def answered(outputs: list[Row]) -> list[str]:
    """content ids of the detector.results in the operator's output rows, in order."""
    return [
        json.loads(value)["content_id"]
        for row in outputs
        for topic, value in zip(row[0], row[2], strict=True)
        if topic == "detector.results"
    ]


@pytest.fixture
def gated(monkeypatch: pytest.MonkeyPatch) -> Gated:
    """The gated detector for every name."""
    detector = Gated()
    monkeypatch.setattr(modstream.jobs.scan.job, "detector", lambda name, **_: detector)
    return detector


_readings = iter(range(0))


def clock() -> int:
    """The operators' processing clock: 5 ms later at every reading, from T0 in each test."""
    return next(_readings)


@pytest.fixture(autouse=True)
def _clock_from_t0() -> None:
    global _readings
    _readings = iter(range(T0, T0 + 10_000_000, 5))


def operator(runtime: Runtime, workers: int = 2) -> Scan:
    scan = Scan(ScanConfig(model_workers=workers, max_wait_ms=20, clock=clock))
    scan.open(runtime)  # type: ignore[arg-type]
    return scan


def test_batches_in_flight_are_in_state_and_come_out_in_arrival_order(gated: Gated) -> None:
    runtime, ctx = Runtime(), Context()
    scan = operator(runtime, workers=2)
    try:
        outputs: list[Row] = []
        for number in range(4):  # up to twice the workers in flight: nothing waits yet
            outputs += scan.process_element(batch(2 * number, 2 * number + 1), ctx)
        assert outputs == []
        held = json.loads(runtime.states["inflight"].value())
        assert [keys for _, keys, _ in held] == [
            ["c-0", "c-1"],
            ["c-2", "c-3"],
            ["c-4", "c-5"],
            ["c-6", "c-7"],
        ]
        outputs += scan.process_element(batch(8), ctx)  # the fifth waits, admitted
        assert outputs == []
        [(rows, _, _)] = [json.loads(raw) for raw in runtime.states["waiting"].values()]
        assert [key for _, key, _ in rows] == ["c-8"]
        gated.release.set()
        outputs += settle(scan, ctx)
        assert answered(outputs) == [f"c-{i}" for i in range(9)]
        assert runtime.states["inflight"].value() is None
        assert not runtime.states["waiting"]
    finally:
        gated.release.set()
        scan.close()


def settle(scan: Scan, ctx: Context, rounds: int = 10) -> list[Row]:
    """Timers until nothing is in flight or waiting: each round waits for the batches in flight
    (a condition, not a sleep), then fires the latest timer."""
    outputs: list[Row] = []
    for _ in range(rounds):
        for flying in scan.inflight.values():
            for batch_in_flight in flying:
                batch_in_flight.future.result(timeout=10)
        outputs += scan.on_timer(max(ctx.timers.registered), ctx)
        if not any(scan.inflight.values()) and not any(len(q) for q in scan.queues.values()):
            return outputs
    raise AssertionError("the scan operator did not settle")


def test_a_timer_while_batches_keep_coming_waits_for_nothing(gated: Gated) -> None:
    runtime, ctx = Runtime(), Context()
    scan = operator(runtime)
    try:
        assert list(scan.process_element(batch(0), ctx)) == []
        first = ctx.timers.registered[-1]
        assert list(scan.process_element(batch(1), ctx)) == []
        # The timer fires while neither batch is done: nothing is waited for, nothing emitted.
        assert list(scan.on_timer(first, ctx)) == []
        gated.release.set()
        outputs = settle(scan, ctx)
        assert answered(outputs) == ["c-0", "c-1"]
    finally:
        gated.release.set()
        scan.close()


def test_batches_a_restored_checkpoint_held_in_flight_are_handled_again(gated: Gated) -> None:
    runtime, ctx = Runtime(), Context()
    before = operator(runtime)
    try:
        for number in range(2):
            assert list(before.process_element(batch(number), ctx)) == []
    finally:
        gated.release.set()
        before.close()
    # The checkpoint holds the state as it was; a new operator instance restores it.
    restored = operator(runtime)
    try:
        outputs = list(restored.process_element(batch(2), ctx))
        outputs += settle(restored, ctx)
        assert answered(outputs) == ["c-0", "c-1", "c-2"]
        bad = Row([TOPIC], ["bad"], ["{not json"])
        outputs = list(restored.process_element(bad, ctx))
        outputs += settle(restored, ctx)
        letters = [
            json.loads(value)
            for row in outputs
            for topic, value in zip(row[0], row[2], strict=True)
            if topic == "moderation.dlq"
        ]
        assert [letter["key"] for letter in letters] == ["bad"]
    finally:
        restored.close()


class Poisoned:
    """A text detector with a bug one hostile text triggers: the text "poison" makes any call
    that holds it throw (as a decoder bug, a recursion or memory would), and the text "numpy"
    makes it return a score that cannot be serialized."""

    name = "offensive_text"
    model_version = "poisoned-1"
    modalities = ("text",)
    labels = ("offensive",)

    def __init__(self) -> None:
        self.calls: list[int] = []

    def detect(self, items: Sequence[Item]) -> list[dict[str, float] | MediaError]:
        self.calls.append(len(items))
        if any(item.text == "poison" for item in items):
            raise RecursionError("maximum recursion depth exceeded")
        unserializable: Any = np.float32(0.5)
        return [{"offensive": unserializable if item.text == "numpy" else 0.5} for item in items]


def outputs_of(outputs: list[Row], topic: str) -> list[dict[str, Any]]:
    return [
        json.loads(value)
        for row in outputs
        for name, value in zip(row[0], row[2], strict=True)
        if name == topic
    ]


@pytest.fixture
def poisoned(monkeypatch: pytest.MonkeyPatch) -> Poisoned:
    detector = Poisoned()
    monkeypatch.setattr(modstream.jobs.scan.job, "detector", lambda name, **_: detector)
    return detector


def held(*texts: tuple[str, str]) -> str:
    """The `inflight` state a checkpoint took with one batch of these (id, text) in flight."""
    values = [json.dumps(request(i, text)) for i, text in texts]
    return json.dumps([[[TOPIC] * len(texts), [f"c-{i}" for i, _ in texts], values]])


def test_a_restored_batch_that_fails_again_fails_per_request_not_in_a_restart_loop(
    poisoned: Poisoned,
) -> None:
    """The batch a checkpoint held in flight throws again after the restore (its poison
    request is still in it): each request is answered, the poison one `error` with one DLQ
    row `permanent`; the operator never throws, so Flink never restores the same batch again."""
    for restart in range(2):  # a restart must not change anything: same answers, no throw
        runtime, ctx = Runtime(), Context()
        runtime.get_state(type("D", (), {"name": "inflight"})).update(
            held(("0", "fine"), ("p", "poison"), ("1", "also fine"))
        )
        scan = operator(runtime)
        try:
            outputs = list(scan.process_element(batch(2), ctx))
            outputs += settle(scan, ctx)
        finally:
            scan.close()
        results = {r["content_id"]: r["status"] for r in outputs_of(outputs, "detector.results")}
        assert results == {"c-0": "ok", "c-p": "error", "c-1": "ok", "c-2": "ok"}, restart
        [letter] = outputs_of(outputs, "moderation.dlq")
        assert (letter["key"], letter["error_class"]) == ("c-p", "permanent")
        assert "RecursionError" in letter["message"] and "poison" not in letter["message"]
        assert runtime.states["inflight"].value() is None
    assert poisoned.calls[:4] == [3, 1, 1, 1]  # the batch, then each request alone


def test_a_request_that_breaks_the_result_path_is_answered_error_and_the_rest_go_on(
    poisoned: Poisoned,
) -> None:
    """A detector returns what cannot be serialized for one request: the whole batch throws
    once, then each row alone; only that one is refused (error result, DLQ `permanent`)."""
    runtime, ctx = Runtime(), Context()
    scan = operator(runtime)
    values = [json.dumps(request(i, t)) for i, t in (("a", "fine"), ("n", "numpy"), ("b", "ok"))]
    try:
        outputs = list(scan.process_element(Row([TOPIC] * 3, ["c-a", "c-n", "c-b"], values), ctx))
        outputs += settle(scan, ctx)
    finally:
        scan.close()
    results = {r["content_id"]: r["status"] for r in outputs_of(outputs, "detector.results")}
    assert results == {"c-a": "ok", "c-n": "error", "c-b": "ok"}
    assert [(d["key"], d["error_class"]) for d in outputs_of(outputs, "moderation.dlq")] == [
        ("c-n", "permanent")
    ]


def test_rows_that_do_not_decode_go_to_the_dlq_with_a_class_and_the_batch_goes_on(
    poisoned: Poisoned,
) -> None:
    good = request("g", "fine")
    rows = {
        "not-json": "{oops",
        "deep": "[" * 100_000 + "]" * 100_000,
        "deep-object": '{"a":' * 50_000 + "1" + "}" * 50_000,
        "bool-for-int": json.dumps({**request("x", "t"), "content_version": True}),
        "string-for-int": json.dumps({**request("y", "t"), "segments": "2"}),
        "huge-int": json.dumps({**request("z", "t"), "attempt": 2**70}),
        "nan": json.dumps({**request("w", "t"), "deadline_ts": float("nan")}),
        "not-an-object": "[1, 2, 3]",
        "null": "null",
        "empty": "",
        "duplicate-field": json.dumps(request("d", "t"))[:-1] + ', "text": "other"}',
        "unknown-modality": json.dumps({**request("m", "t"), "modality": "smell"}),
        "over-size": json.dumps(request("o", "x" * 2_000_000)),
        "good": json.dumps(good),
    }
    runtime, ctx = Runtime(), Context()
    scan = operator(runtime)
    try:
        mixed = Row([TOPIC] * len(rows), list(rows), list(rows.values()))
        outputs = list(scan.process_element(mixed, ctx))
        outputs += settle(scan, ctx)
        # The job goes on: a later batch is answered as usual.
        outputs += scan.process_element(batch(7), ctx)
        outputs += settle(scan, ctx)
    finally:
        scan.close()
    letters = outputs_of(outputs, "moderation.dlq")
    assert sorted(letter["key"] for letter in letters) == sorted(set(rows) - {"good"})
    assert {letter["error_class"] for letter in letters} == {"schema"}
    results = [r["content_id"] for r in outputs_of(outputs, "detector.results")]
    assert results == ["c-g", "c-7"]


def test_a_retry_that_throws_is_answered_error_not_a_timer_that_throws_forever(
    poisoned: Poisoned,
) -> None:
    runtime, ctx = Runtime(), Context()
    scan = operator(runtime)
    retry = {**request("p", "poison"), "attempt": 2}
    scan.retries.put("p", json.dumps([retry, T0 + 50]))
    try:
        outputs = list(scan.on_timer(T0 + 50, ctx))
    finally:
        scan.close()
    assert [r["status"] for r in outputs_of(outputs, "detector.results")] == ["error"]
    [letter] = outputs_of(outputs, "moderation.dlq")
    assert letter["error_class"] == "permanent" and letter["attempts"] == 2
    assert dict(runtime.states["retries"]) == {}


def requests_batch(*requests: dict[str, Any]) -> Row:
    return Row(
        [TOPIC] * len(requests),
        [r["content_id"] for r in requests],
        [json.dumps(r) for r in requests],
    )


def statuses(outputs: list[Row]) -> dict[str, str]:
    return {r["content_id"]: r["status"] for r in outputs_of(outputs, "detector.results")}


def test_what_the_pool_cannot_answer_by_its_deadline_is_answered_timeout_at_once(
    gated: Gated,
) -> None:
    """One worker at 10 requests/s (100 ms each), a 250 ms budget: two are admitted, the
    other three are answered `timeout` in the same call, signed like every result."""
    runtime, ctx = Runtime(), Context()
    scan = Scan(ScanConfig(model_workers=1, max_wait_ms=20, clock=clock, capacity_rps=10))
    scan.open(runtime)  # type: ignore[arg-type]
    try:
        one_batch = requests_batch(
            *(request(str(i), f"text {i}", deadline_ts=T0 + 250) for i in range(5))
        )
        scan.inflight_state.clear()
        outputs = list(scan.process_element(one_batch, ctx))
        assert statuses(outputs) == {"c-2": "timeout", "c-3": "timeout", "c-4": "timeout"}
        assert {r["model_version"] for r in outputs_of(outputs, "detector.results")} == {"gated-1"}
        gated.release.set()
        outputs = settle(scan, ctx)
        assert statuses(outputs) == {"c-0": "ok", "c-1": "ok"}
    finally:
        gated.release.set()
        scan.close()


def test_live_high_risk_then_live_then_backfill_across_batches(gated: Gated) -> None:
    """With the workers busy, later batches wait; the waiting are served by class, not by
    arrival: a live high-risk request that came last is scanned first."""
    runtime, ctx = Runtime(), Context()
    scan = Scan(ScanConfig(model_workers=1, max_batch=4, max_wait_ms=20, clock=clock))
    scan.open(runtime)  # type: ignore[arg-type]
    try:
        outputs: list[Row] = []
        for busy in ("busy-0", "busy-1"):  # fill the two batches in flight
            outputs += scan.process_element(requests_batch(request(busy, "x")), ctx)
        outputs += scan.process_element(requests_batch(request("b", "x", priority="backfill")), ctx)
        outputs += scan.process_element(requests_batch(request("l", "x")), ctx)
        outputs += scan.process_element(requests_batch(request("h", "x", high_risk=True)), ctx)
        assert outputs == []
        gated.release.set()
        outputs = settle(scan, ctx)
        assert answered(outputs) == ["c-busy-0", "c-busy-1", "c-h", "c-l", "c-b"]
    finally:
        gated.release.set()
        scan.close()


def test_waiting_requests_are_in_state_and_admitted_again_after_a_restore(gated: Gated) -> None:
    runtime, ctx = Runtime(), Context()
    before = Scan(ScanConfig(model_workers=1, max_batch=4, max_wait_ms=20, clock=clock))
    before.open(runtime)  # type: ignore[arg-type]
    try:
        for number in range(4):
            assert list(before.process_element(batch(number), ctx)) == []
        assert len(runtime.states["waiting"]) == 2  # c-2 and c-3 wait; c-0, c-1 fly
    finally:
        gated.release.set()
        before.close()
    restored = operator(runtime)
    try:
        outputs = list(restored.process_element(batch(4), ctx))
        outputs += settle(restored, ctx)
        assert sorted(answered(outputs)) == [f"c-{i}" for i in range(5)]
        assert not runtime.states["waiting"]
    finally:
        restored.close()


def test_a_backfill_pushed_out_by_a_live_request_of_its_own_arrival_is_not_kept(
    gated: Gated,
) -> None:
    """One batch: a backfill admitted, then a live request that takes its place: the backfill
    is answered `timeout` and is not in the waiting state (a restore would answer it twice)."""
    runtime, ctx = Runtime(), Context()
    scan = Scan(ScanConfig(model_workers=1, max_wait_ms=20, clock=clock, capacity_rps=10))
    scan.open(runtime)  # type: ignore[arg-type]
    try:
        scan.inflight_state.clear()
        for part in range(2):  # two batches of 8 in flight: the most for one worker
            busy = [request(f"busy-{part}-{i}", "x", deadline_ts=T0 + 60_000) for i in range(8)]
            list(scan.process_element(requests_batch(*busy), ctx))
        # 16 ahead at 100 ms each: either alone answers in 1.7 s, the second in 1.8 s.
        mixed = requests_batch(
            request("b", "x", priority="backfill", deadline_ts=T0 + 1_750),
            request("l", "x", deadline_ts=T0 + 1_750),
        )
        outputs = list(scan.process_element(mixed, ctx))
        assert statuses(outputs) == {"c-b": "timeout"}
        stored = [json.loads(raw) for raw in runtime.states["waiting"].values()]
        waiting_keys = sorted(key for rows, _, _ in stored for _, key, _ in rows)
        assert "c-b" not in waiting_keys and "c-l" in waiting_keys
    finally:
        gated.release.set()
        scan.close()


def stamped(requests: list[dict[str, Any]], record_ms: int) -> Row:
    """A Batcher batch whose requests were written to Kafka at `record_ms` (`arrivals[]`)."""
    plain = requests_batch(*requests)
    return Row(plain[0], plain[1], plain[2], [str(record_ms)] * len(requests))


def test_a_busy_pool_keeps_reading_and_refuses_what_waited_upstream_at_once(
    gated: Gated,
) -> None:
    """The one worker never answers while this runs: every call still returns (the operator
    waits for no worker), later requests wait in the queue, and a batch whose requests spent
    their 60 s budget in Kafka before the read is answered `timeout` in the call that reads
    it, signed like every result."""
    runtime, ctx = Runtime(), Context()
    scan = Scan(
        ScanConfig(model_workers=1, max_batch=4, max_wait_ms=20, clock=clock, capacity_rps=10)
    )
    scan.open(runtime)  # type: ignore[arg-type]
    try:
        outputs: list[Row] = []
        for part in range(6):  # 2 batches fly, 16 requests wait: 2.4 s of work, in budget
            fresh = [request(f"{part}-{i}", "x") for i in range(4)]
            outputs += scan.process_element(stamped(fresh, T0), ctx)
        assert outputs == [] and not gated.release.is_set()
        assert len(scan.queues["offensive_text"]) == 16
        stale = [request(f"stale-{i}", "x") for i in range(3)]
        outputs = list(scan.process_element(stamped(stale, T0 - 61_000), ctx))
        assert statuses(outputs) == {f"c-stale-{i}": "timeout" for i in range(3)}
        assert {r["model_version"] for r in outputs_of(outputs, "detector.results")} == {"gated-1"}
        assert len(scan.queues["offensive_text"]) == 16
        gated.release.set()
        answers = statuses(settle(scan, ctx, rounds=20))
        assert answers == {f"c-{p}-{i}": "ok" for p in range(6) for i in range(4)}
        assert not runtime.states["waiting"] and runtime.states["inflight"].value() is None
    finally:
        gated.release.set()
        scan.close()


def test_a_restore_admits_waiting_requests_with_what_is_left_of_their_budget(
    gated: Gated,
) -> None:
    """`waiting` keeps when each request arrived: one whose budget ran out across the restore
    is answered `timeout` when admitted again, one with time left is scanned."""
    runtime, ctx = Runtime(), Context()
    before = Scan(ScanConfig(model_workers=1, max_batch=4, max_wait_ms=20, clock=clock))
    before.open(runtime)  # type: ignore[arg-type]
    try:
        for number in range(2):  # the two batches in flight for one worker
            list(before.process_element(batch(number), ctx))
        short = request("short", "x", deadline_ts=T0 + 1_000)  # 1 s budget
        long = request("long", "x")  # 60 s budget
        assert list(before.process_element(stamped([short, long], T0), ctx)) == []
        [(_, _, arrived)] = [json.loads(raw) for raw in runtime.states["waiting"].values()]
        assert arrived == [T0, T0]
    finally:
        gated.release.set()
        before.close()
    restored = Scan(ScanConfig(model_workers=1, max_batch=4, max_wait_ms=20, clock=later_clock))
    restored.open(runtime)  # type: ignore[arg-type]
    try:
        outputs = list(restored.process_element(batch(2), ctx))
        outputs += settle(restored, ctx)
        assert statuses(outputs) == {
            "c-0": "ok",
            "c-1": "ok",
            "c-2": "ok",
            "c-short": "timeout",
            "c-long": "ok",
        }
    finally:
        restored.close()


def later_clock() -> int:
    """The restored job's clock: 5 s after the checkpoint's."""
    return clock() + 5_000


def report_row(content_id: str, content_version: int = 1) -> Row:
    """A `moderation.reports` row as the scan job's source gives it (docs/CONTRACT.md)."""
    report = {
        "event_id": f"report-{content_id}",
        "report_id": f"r-{content_id}",
        "content_id": content_id,
        "content_version": content_version,
        "reporter_id": "u-1",
        "reason": "abuse",
        "ts": T0,
    }
    return Row("moderation.reports", content_id, json.dumps(report), T0, "lane")


def test_a_report_bumps_its_versions_waiting_requests_ahead_of_the_rest(gated: Gated) -> None:
    """Workers busy, three live requests wait; a report on the last one's version (and one on
    another version, and one that does not decode) arrive on the broadcast input: the reported
    request is scanned first, the others keep their order."""
    runtime, ctx = Runtime(), Context()
    scan = Scan(ScanConfig(model_workers=1, max_batch=1, max_wait_ms=20, clock=clock))
    scan.open(runtime)  # type: ignore[arg-type]
    try:
        outputs: list[Row] = []
        for busy in ("busy-0", "busy-1"):  # the two batches in flight for one worker
            outputs += scan.process_element(requests_batch(request(busy, "x")), ctx)
        for waiting in ("a", "b", "c"):
            outputs += scan.process_element(requests_batch(request(waiting, "x")), ctx)
        outputs += scan.process_broadcast_element(report_row("c-c"), ctx)
        outputs += scan.process_broadcast_element(report_row("c-a", content_version=2), ctx)
        outputs += scan.process_broadcast_element(Row("moderation.reports", "x", "{oops"), ctx)
        assert outputs == []
        gated.release.set()
        outputs = settle(scan, ctx, rounds=20)
        assert answered(outputs) == ["c-busy-0", "c-busy-1", "c-c", "c-a", "c-b"]
    finally:
        gated.release.set()
        scan.close()


def test_a_backlog_past_max_waiting_waits_for_a_worker_instead_of_filling_memory(
    poisoned: Poisoned,
) -> None:
    """Requests with long budgets arriving faster than one worker answers: once `max_waiting`
    wait, the operator waits for the oldest batch in flight (results come out of the reading
    calls, no timer needed), so the queue never grows past the bound; all are answered."""
    runtime, ctx = Runtime(), Context()
    config = ScanConfig(model_workers=1, max_batch=1, max_wait_ms=20, clock=clock, max_waiting=2)
    scan = Scan(config)
    scan.open(runtime)  # type: ignore[arg-type]
    try:
        outputs: list[Row] = []
        for number in range(8):
            outputs += scan.process_element(batch(number), ctx)
            assert len(scan.queues["offensive_text"]) <= 2
        assert answered(outputs)  # emitted while reading
        outputs += settle(scan, ctx)
        assert sorted(answered(outputs)) == [f"c-{i}" for i in range(8)]
    finally:
        scan.close()
