"""The sanctions' batched Python side (modstream/jobs/moderation/sanctions_batch.py) against the
PyFlink adapter `Sanctions` it replaces: the same account actions, DLQ letters, stored state and
timers, one call per watermark. The version operator's `_sanctions` rows reach the batched side as
KeyedAt.java makes them: keyed input at `at`. No JVM (tests/jobs/keyed_sides.py)."""

from __future__ import annotations

import json
from typing import Any

import yaml
from pyflink.common import Row

from modstream.enforcement import sanctions
from modstream.jobs.moderation.config import ModerationConfig
from modstream.jobs.moderation.sanctions import Sanctions
from modstream.jobs.moderation.sanctions_batch import RESTORED_BUFFER, BatchedSanctions
from modstream.moderation import state_schema
from modstream.testing.flink import FlinkKeyed, JavaKeyed, sanction_entry
from modstream.testing.policies import GLOBAL_YAML
from modstream.testing.records import T0

WINDOW_MS = yaml.safe_load(GLOBAL_YAML.read_text())["strikes"]["window_days"] * sanctions.DAY_MS


def _keyed_at(row: Row) -> Row:
    """KeyedAt.java: Row(topic, key, value) -> Row("keyed", key, topic, value, at, 0, "")."""
    return Row("keyed", row[1], row[0], row[2], json.loads(row[2])["at"], 0, "")


def _both(arrivals: list[Row | int]) -> tuple[FlinkKeyed, JavaKeyed, list[Any], list[Any]]:
    config = ModerationConfig()
    flink = FlinkKeyed(lambda: Sanctions(config), key_of=lambda row: row[1])
    java = JavaKeyed(BatchedSanctions, config)
    stepwise: list[Any] = []
    batched: list[Any] = []
    for item in arrivals:
        if isinstance(item, int):
            stepwise += flink.watermark(item)
            batched += java.watermark(item)
        else:
            stepwise += flink.element(item)
            java.element(_keyed_at(item))
    return flink, java, stepwise, batched


def _entry(author: str, content_id: str, at: int, emitted_at: int) -> Row:
    return Row("_sanctions", author, sanction_entry(content_id, at, emitted_at))


def _by_author(rows: list[Any]) -> dict[str, list[Any]]:
    """Rows per author, in order (authors are independent keys)."""
    authors: dict[str, list[Any]] = {}
    for row in rows:
        authors.setdefault(json.loads(row[2])["user_id"], []).append(row)
    return authors


def _same_state(flink: FlinkKeyed, java: JavaKeyed) -> None:
    assert {key: value.encode() for key, value in flink.stored().items()} == java.values
    assert flink.timers() == java.timers


def test_strikes_to_a_suspension_and_their_expiry_give_the_same_actions_and_state() -> None:
    """Two authors, decisions at two emission times, then every strike ages out: the same rows
    in the same order per author, the same account state, then none; one call per watermark."""
    arrivals: list[Row | int] = [
        _entry("author-1", "c-3", T0, T0 + 5),
        _entry("author-2", "c-9", T0, T0 + 5),
        _entry("author-1", "c-1", T0, T0 + 5),
        _entry("author-1", "c-2", T0 + 7, T0 + 9),
        T0 + 9,
    ]
    flink, java, stepwise, batched = _both(arrivals)
    assert _by_author(batched) == _by_author(stepwise)
    assert [json.loads(row[2])["strike_count"] for row in _by_author(batched)["author-1"]][-1] == 3
    _same_state(flink, java)
    assert java.calls == 1
    later = T0 + 10 * WINDOW_MS
    assert flink.watermark(later) == java.watermark(later)
    _same_state(flink, java)
    assert java.values == {} and java.timers == set()


def test_an_expiry_due_between_two_emission_times_fires_between_them() -> None:
    """One watermark readies decisions at T0, the strike's expiry and decisions after it: the
    expiry runs between them, as Flink fires the timer the first decisions set."""
    arrivals: list[Row | int] = [
        _entry("author-1", "c-1", T0, T0),
        _entry("author-1", "c-2", T0 + WINDOW_MS + 10, T0 + WINDOW_MS + 10),
        _entry("author-1", "c-3", T0 + WINDOW_MS + 10, T0 + WINDOW_MS + 10),
        T0 + WINDOW_MS + 10,
    ]
    flink, java, stepwise, batched = _both(arrivals)
    assert batched == stepwise and stepwise
    _same_state(flink, java)
    assert java.calls == 1


def test_decisions_emitted_at_an_account_timer_run_once_as_that_timer() -> None:
    """An account timer and decisions emitted at its ts are one Flink timer for `Sanctions`
    (its buffer's): the decisions run, nothing more; the batched side the same."""
    first: list[Row | int] = [_entry("author-1", "c-1", T0, T0), T0]
    flink, java, _, _ = _both(first)
    [(_, expiry)] = java.timers
    rest: list[Row | int] = [_entry("author-1", "c-2", expiry, expiry), expiry]
    stepwise: list[Any] = []
    batched: list[Any] = []
    for item in rest:
        if isinstance(item, int):
            stepwise += flink.watermark(item)
            batched += java.watermark(item)
        else:
            stepwise += flink.element(item)
            java.element(_keyed_at(item))
    assert batched == stepwise
    _same_state(flink, java)


def test_a_state_too_new_sends_each_decision_to_the_dlq_and_keeps_the_state() -> None:
    config = ModerationConfig()
    java = JavaKeyed(BatchedSanctions, config)
    too_new = json.dumps({**sanctions.new_state(), state_schema.SCHEMA_FIELD: 10**6}).encode()
    java.values["author-1"] = too_new
    java.element(_keyed_at(_entry("author-1", "c-1", T0, T0 + 5)))
    [letter] = java.watermark(T0 + 5)
    assert letter[0] == config.physical("moderation.dlq")
    assert json.loads(letter[2])["error_class"] == "permanent"
    assert java.values == {"author-1": too_new}
    assert java.metrics[0][:2] == ["counter", "dlq"]


def test_decisions_held_in_the_pyflink_buffer_restore_as_that_times_input() -> None:
    """A savepoint of the PyFlink engine (issue 26): `Sanctions` held an author's decisions at
    one `at` in its buffer (a JSON list, `at` removed) until its timer there. Java hands that
    list on at the timer as one input of topic RESTORED_BUFFER: the same actions and state as
    `Sanctions` gives for the same decisions."""
    held = [_entry("author-1", "c-1", T0, T0 + 5), _entry("author-1", "c-2", T0, T0 + 5)]
    flink, _, stepwise, _ = _both([*held, T0 + 5])
    buffer = [{k: v for k, v in json.loads(row[2]).items() if k != "at"} for row in held]
    java = JavaKeyed(BatchedSanctions, ModerationConfig())
    java.element(Row("keyed", "author-1", RESTORED_BUFFER, json.dumps(buffer), T0 + 5, 0, ""))
    batched = java.watermark(T0 + 5)
    assert batched == stepwise and len(batched) >= 2
    _same_state(flink, java)
