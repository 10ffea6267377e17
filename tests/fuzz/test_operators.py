"""Valid but odd input through the pure moderation step (`modstream.moderation.step.step`): ids
with separators, path tricks and look-alikes, extreme but valid numbers. The step never raises,
every output follows the contract, the state survives a JSON round trip after every input and
is gone after its TTL, and two distinct versions never share a key or an output id."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pyflink.common import Row

from modstream.contract import parse
from modstream.contract.dlq import ErrorClass
from modstream.jobs.moderation.config import ModerationConfig
from modstream.jobs.moderation.decode import Decode
from modstream.moderation import state_schema
from modstream.moderation.state import ReportWeight, VersionState
from modstream.moderation.step import (
    REVIEW_RETENTION_MS,
    SANCTIONS,
    STATE_TTL_MS,
    Context,
    StepResult,
    index_key,
    on_timer,
    step,
)
from modstream.policy.store import PolicyStore
from modstream.testing.fuzz.strategies import (
    DAY_MS,
    EXTREME_VERSIONS,
    HOSTILE_ID,
    HOSTILE_IDS,
    KINDS,
    records,
)
from modstream.testing.policies import global_document
from modstream.testing.records import T0, upload

ERROR_CLASSES = set(ErrorClass.__args__)  # type: ignore[attr-defined]
FOLLOWERS = ("detector", "report", "review", "appeal", "reevaluate", "delete")
ODD = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _resolution() -> Any:
    store = PolicyStore()
    store.install(global_document(1), ts=0)
    return store.resolve("global", T0, "x")


RESOLUTION = _resolution()


@st.composite
def odd_history(draw: st.DrawFn) -> list[tuple[str, dict[str, Any]]]:
    """An upsert with hostile ids and then up to eight other inputs for the same version, in
    event-time order, each with its own hostile ids and extreme but valid numbers."""
    extreme = draw(st.booleans())
    first = draw(records("upsert", hostile=True, extreme=extreme))
    content_id, version, ts = first["content_id"], first["content_version"], first["ts"]
    history = [("content.versions", first)]
    for kind in draw(st.lists(st.sampled_from(FOLLOWERS), max_size=8)):
        ts += draw(st.integers(0, 3 * DAY_MS))
        record = draw(records(kind, hostile=True, extreme=draw(st.booleans())))
        record.update(content_id=content_id, content_version=version, ts=ts)
        history.append((KINDS[kind].topic, record))
    return history


class Driver:
    """Drives one version's state through `step` and `on_timer` as the adapter does: state
    stored as the job stores it, timers fired in order."""

    def __init__(self) -> None:
        self.state: VersionState | None = None
        self.timers: set[int] = set()
        self.outputs: list[tuple[str, str, dict[str, Any]]] = []

    def take(self, result: StepResult) -> None:
        stored = None if result.state is None else state_schema.dump_version(result.state)
        self.state = state_schema.load_version(stored)
        assert self.state == result.state  # what Flink keeps is exactly this
        self.timers |= set(result.timers)
        for error_class, message in result.dead_letters:
            assert error_class in ERROR_CLASSES, message
        for topic, key, value in result.outputs:
            if topic != SANCTIONS:
                parse(topic, json.dumps(value))  # every output follows the contract
                assert key == (
                    index_key(value["content_id"], value["content_version"])
                    if topic == "moderation.index"  # compacted: one key per version
                    else value["content_id"]
                )
            self.outputs.append((topic, key, value))

    def fire_until(self, ts: int) -> None:
        while due := sorted(timer for timer in self.timers if timer <= ts):
            self.timers.discard(due[0])
            self.take(on_timer(self.state, due[0], Context(RESOLUTION)))

    def send(self, topic: str, record: dict[str, Any], new_reporter: bool = False) -> None:
        self.fire_until(record["ts"] - 1)
        parsed = parse(topic, json.dumps(record))
        weight = ReportWeight(1.0, new_reporter) if topic == "moderation.reports" else None
        self.take(step(self.state, topic, parsed, record["ts"], Context(RESOLUTION, report=weight)))


@ODD
@given(history=odd_history(), new_reporter=st.booleans())
def test_odd_but_valid_input_never_raises_and_state_round_trips(
    history: list[tuple[str, dict[str, Any]]], new_reporter: bool
) -> None:
    driver = Driver()
    for topic, record in history:
        driver.send(topic, record, new_reporter)
    content_id = history[0][1]["content_id"]
    for topic, _, value in driver.outputs:
        about = value["decision"] if topic == SANCTIONS else value
        assert about["content_id"] == content_id
    driver.fire_until(history[-1][1]["ts"] + STATE_TTL_MS + DAY_MS)
    # Every final state clears its keyed state, but a decided version's compact record, kept
    # for review (docs/moderation.md, "Retention"), which clears after its retention.
    assert driver.state is None or driver.state.retired
    driver.fire_until(history[-1][1]["ts"] + STATE_TTL_MS + REVIEW_RETENTION_MS + DAY_MS)
    assert driver.state is None


VERSION_IDS = st.tuples(HOSTILE_ID, st.sampled_from(EXTREME_VERSIONS) | st.integers(1, 20))
COLLISION_CANDIDATES = [
    (("a\x1f1", 2), ("a", 1)),
    (("a\x1f1\x1f2", 3), ("a\x1f1", 2)),
    (("a|1", 2), ("a", 12)),
    (("a|1", 2), ("a|12", 1)),
    (("a/1", 1), ("a", 1)),
    (("../a", 1), ("a", 1)),
    (("c-a", 1), ("c-а", 1)),  # Latin and Cyrillic a
    (("café", 1), ("cafe\u0301", 1)),
    (("c-1", 1), ("c\u200d-1", 1)),
    (("c-1", 1), ("c-１", 1)),  # fullwidth one
]


def version_key(content_id: str, version: int) -> str:
    """The key the moderation job's Decode gives an upload of this version."""
    record = upload(content_id, T0, event_id="ev-1", content_version=version)
    rows = list(
        Decode(ModerationConfig()).process_element(
            Row("content.versions", content_id, json.dumps(record), T0, "content.versions#0"),
            None,
        )
    )
    assert len(rows) == 1 and rows[0][0] == "keyed", rows
    return str(rows[0][1])


def output_ids(content_id: str, version: int) -> set[str]:
    """Every id in the outputs of one version's upload and a decision on it."""
    driver = Driver()
    driver.send(
        "content.versions", upload(content_id, T0, event_id="ev-1", content_version=version)
    )
    ids = set()
    for _, _, value in driver.outputs:
        for name in ("decision_id", "action_id", "notification_id", "request_id", "task_id"):
            if name in value:
                ids.add(value[name])
    assert ids
    return ids


def assert_apart(one: tuple[str, int], other: tuple[str, int]) -> None:
    assert version_key(*one) != version_key(*other)
    assert not output_ids(*one) & output_ids(*other)


@pytest.mark.parametrize(("one", "other"), COLLISION_CANDIDATES)
def test_ids_built_to_collide_stay_apart(one: tuple[str, int], other: tuple[str, int]) -> None:
    assert_apart(one, other)


@settings(max_examples=60, deadline=None)
@given(one=VERSION_IDS, other=VERSION_IDS)
def test_distinct_versions_never_share_a_key_or_an_output_id(
    one: tuple[str, int], other: tuple[str, int]
) -> None:
    assume(one != other)
    assert_apart(one, other)


def test_every_fixed_hostile_id_is_a_valid_content_id() -> None:
    for content_id in HOSTILE_IDS:
        parse("content.versions", json.dumps(upload(content_id, event_id="ev-1")))
