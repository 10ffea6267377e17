"""The reconciler's adapter with small fakes (no JVM): a poison record goes to the DLQ with its
class, the content item's state is untouched, and the next record is still reconciled."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyflink.common import Row

from modstream.jobs import reconciler
from modstream.jobs.reconciler import Reconcile, ReconcilerConfig
from modstream.moderation import exposure
from modstream.testing.enforcement import POISON_ACTIONS as POISON
from modstream.testing.enforcement import job_action as action
from modstream.testing.flink import ProcessingContext as FakeContext
from modstream.testing.flink import ReconcilerRuntimeContext as FakeRuntimeContext
from modstream.testing.records import SECRET_TEXT, T0, upload


def adapter() -> tuple[Reconcile, FakeRuntimeContext]:
    function = Reconcile(ReconcilerConfig(sla_ms=1_000))
    runtime = FakeRuntimeContext()
    function.open(runtime)  # type: ignore[arg-type]
    return function, runtime


def row(raw: str | None, topic: str = "moderation.actions") -> Row:
    return Row(topic, "c-1", raw, T0, f"{topic}#0")


def visible(revision: int, visibility: str, at: int = T0) -> str:
    return json.dumps(
        {
            "content_id": "c-1",
            "content_version": 1,
            "decision_revision": revision,
            "visibility": visibility,
            "ts": at,
        }
    )


def emitted(function: Reconcile, value: Row, ctx: FakeContext) -> list[tuple[str, Any]]:
    return [(r[0], json.loads(r[2])) for r in function.process_element(value, ctx)]


@pytest.mark.parametrize("raw", list(POISON.values()), ids=list(POISON))
@pytest.mark.parametrize("topic", ["moderation.actions", "content.visibility"])
def test_a_poison_record_is_dead_lettered_and_the_next_one_is_reconciled(
    raw: str | None, topic: str
) -> None:
    function, runtime = adapter()
    ctx = FakeContext()
    emitted(function, row(json.dumps(action(1, "hidden"))), ctx)
    before = runtime.content.current
    out = emitted(function, row(raw, topic), ctx)
    assert [(t, r["error_class"], r["source_topic"]) for t, r in out] == [
        ("moderation.dlq", "schema", topic)
    ]
    assert runtime.content.current == before
    assert emitted(function, row(visible(1, "hidden"), "content.visibility"), ctx) == []
    state = json.loads(runtime.content.current or "{}")
    assert state["effective"]["visibility"] == "hidden" and state["since"] is None


def test_an_unexpected_failure_is_permanent_and_leaves_the_state_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    function, runtime = adapter()
    ctx = FakeContext()
    emitted(function, row(json.dumps(action(1, "hidden"))), ctx)
    before = runtime.content.current
    real = reconciler.reconcile.on_visibility

    def fails_once(state: Any, record: dict[str, Any], now: int, sla_ms: int, *rest: Any) -> Any:
        if record["visibility"] == "limited":
            raise ValueError(SECRET_TEXT)
        return real(state, record, now, sla_ms, *rest)

    monkeypatch.setattr(reconciler.reconcile, "on_visibility", fails_once)
    out = emitted(function, row(visible(1, "limited"), "content.visibility"), ctx)
    assert [(t, r["error_class"], r["key"]) for t, r in out] == [
        ("moderation.dlq", "permanent", "c-1")
    ]
    assert "handling failed (ValueError)" in out[0][1]["message"]
    assert SECRET_TEXT not in out[0][1]["message"]
    assert runtime.content.current == before
    assert emitted(function, row(visible(1, "hidden"), "content.visibility"), ctx) == []
    assert json.loads(runtime.content.current or "{}")["effective"]["visibility"] == "hidden"


def test_a_failing_timer_dead_letters_the_desired_action_and_arms_nothing() -> None:
    function, runtime = adapter()
    ctx = FakeContext()
    emitted(function, row(json.dumps(action(1, "hidden"))), ctx)
    state = json.loads(runtime.content.current or "{}")
    state["since"] = "not a number"  # a state this code did not write
    runtime.content.update(json.dumps(state))
    armed = list(ctx.timers.processing)
    out = [(r[0], json.loads(r[2])) for r in function.on_timer(T0, ctx)]
    assert [(t, r["error_class"]) for t, r in out] == [("moderation.dlq", "permanent")]
    assert json.loads(out[0][1]["raw"])["action_id"] == action(1)["action_id"]
    assert ctx.timers.processing == armed


def test_a_forgotten_item_clears_its_state() -> None:
    function, runtime = adapter()
    ctx = FakeContext()
    emitted(function, row(json.dumps(action(1, "hidden"))), ctx)
    emitted(function, row(visible(1, "hidden"), "content.visibility"), ctx)
    state = json.loads(runtime.content.current or "{}")
    state["touched"] = state["expires"] = 0  # as if the TTL had passed
    runtime.content.update(json.dumps(state))
    assert list(function.on_timer(T0, ctx)) == []
    assert runtime.content.current is None


def test_a_new_uploads_pending_visibility_with_revision_0_is_an_input_not_a_letter() -> None:
    """The Content Service publishes a new version as pending before any decision applies to
    it (revision 0); the reconciler reads it, it never dead-letters it as a schema error."""
    record = {
        "content_id": "c1", "content_version": 2, "decision_revision": 0,
        "visibility": "pending", "ts": T0,
    }  # fmt: skip
    assert reconciler._decode("content.visibility", json.dumps(record))["decision_revision"] == 0
    with pytest.raises(reconciler.SchemaError):
        reconciler._decode("content.visibility", json.dumps({**record, "decision_revision": -1}))


def decided(revision: int, outcome: str, trigger: str) -> str:
    """A moderation.decisions record of c-1 v1 as the moderation job writes it."""
    return json.dumps(
        {
            "decision_id": f"d-{revision}",
            "content_id": "c-1",
            "content_version": 1,
            "decision_revision": revision,
            "outcome": outcome,
            "reasons": [],
            "matched_rules": [],
            "policy_id": "global",
            "policy_version": 1,
            "evidence": [],
            "completeness": {"required": 0, "received": 0, "unknown": []},
            "trigger": trigger,
            "state": "blocked" if outcome == "BLOCK" else "approved",
            "ts": T0,
        }
    )


def test_a_shown_version_blocked_later_gives_one_exposure_record() -> None:
    function, runtime = adapter()
    ctx = FakeContext()
    facts = upload(surface="public_post", region="FR")
    assert emitted(function, row(json.dumps(facts), "content.versions"), ctx) == []
    allowed = row(decided(1, "ALLOW", "fast_gate"), "moderation.decisions")
    assert emitted(function, allowed, ctx) == []
    emitted(function, row(json.dumps(action(1, "public")), "moderation.actions"), ctx)
    emitted(function, row(visible(1, "public", T0 + 1_000), "content.visibility"), ctx)
    emitted(function, row(decided(2, "BLOCK", "report"), "moderation.decisions"), ctx)
    emitted(function, row(json.dumps(action(2, "hidden")), "moderation.actions"), ctx)
    out = emitted(function, row(visible(2, "hidden", T0 + 61_000), "content.visibility"), ctx)
    assert [(t, r["exposure_ms"], r["surface"], r["region"], r["trigger"]) for t, r in out] == [
        ("enforcement.exposure", 60_000, "public_post", "FR", "report")
    ]
    # Reconciliation went on as before: desired and effective agree.
    assert json.loads(runtime.content.current or "{}")["since"] is None
    again = emitted(function, row(visible(2, "hidden", T0 + 99_000), "content.visibility"), ctx)
    assert again == []


@pytest.mark.parametrize("raw", list(POISON.values()), ids=list(POISON))
def test_upload_facts_that_do_not_parse_are_left_to_the_moderation_job(raw: str | None) -> None:
    function, runtime = adapter()
    ctx = FakeContext()
    assert emitted(function, row(raw, "content.versions"), ctx) == []
    assert runtime.exposure.current is None and runtime.content.current is None


@pytest.mark.parametrize("raw", list(POISON.values()), ids=list(POISON))
def test_a_poison_decision_is_dead_lettered_and_changes_no_state(raw: str | None) -> None:
    function, runtime = adapter()
    ctx = FakeContext()
    emitted(function, row(visible(1, "public"), "content.visibility"), ctx)
    before = (runtime.content.current, runtime.exposure.current)
    out = emitted(function, row(raw, "moderation.decisions"), ctx)
    assert [(t, r["error_class"], r["source_topic"]) for t, r in out] == [
        ("moderation.dlq", "schema", "moderation.decisions")
    ]
    assert (runtime.content.current, runtime.exposure.current) == before


def test_a_failing_exposure_step_leaves_reconciliation_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    function, runtime = adapter()
    ctx = FakeContext()
    emitted(function, row(json.dumps(action(1, "hidden"))), ctx)

    def fails(*args: Any) -> Any:
        raise ValueError(SECRET_TEXT)

    monkeypatch.setattr(reconciler.exposure, "on_visibility", fails)
    assert emitted(function, row(visible(1, "hidden"), "content.visibility"), ctx) == []
    assert json.loads(runtime.content.current or "{}")["effective"]["visibility"] == "hidden"
    assert runtime.exposure.current is None


def test_the_exposure_state_is_forgotten_at_its_ttl() -> None:
    now = [T0]
    function = Reconcile(ReconcilerConfig(sla_ms=1_000, clock=lambda: now[0]))
    runtime = FakeRuntimeContext()
    function.open(runtime)  # type: ignore[arg-type]
    ctx = FakeContext()
    emitted(function, row(visible(1, "public"), "content.visibility"), ctx)
    assert runtime.exposure.current is not None
    expiry = T0 + exposure.STATE_TTL_MS
    assert expiry in ctx.timers.processing
    now[0] = expiry - 1
    list(function.on_timer(expiry - 1, ctx))  # another timer of the key: not yet
    assert runtime.exposure.current is not None
    now[0] = expiry
    list(function.on_timer(expiry, ctx))
    assert runtime.exposure.current is None


def test_a_record_keyed_by_anything_but_its_content_id_reaches_no_exposure_state() -> None:
    function, runtime = adapter()
    ctx = FakeContext(key="")  # a producer that sent no key
    facts = upload(surface="public_post", region="FR")
    assert emitted(function, Row("content.versions", None, json.dumps(facts), T0, "x"), ctx) == []
    assert runtime.exposure.current is None
