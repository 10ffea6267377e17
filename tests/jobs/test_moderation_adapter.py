"""The moderation job's adapters with small fakes of state and context: no JVM."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import yaml
from pyflink.common import Row

from modstream.contract.records import contract_key
from modstream.core import jsonio
from modstream.jobs.moderation.config import REPORT_BATCH, ModerationConfig
from modstream.jobs.moderation.decode import Decode
from modstream.jobs.moderation.letters import DLQ_TAG
from modstream.jobs.moderation.moderate import Moderate, stored
from modstream.jobs.moderation.reports import ReportCombine
from modstream.jobs.moderation.sanctions import Sanctions
from modstream.moderation.state import to_document
from modstream.policy.store import sign
from modstream.testing.flink import (
    FakeContext,
    FakeMapState,
    FakeRuntimeContext,
    FakeTimers,
    decisions_in,
    decoded,
    moderate,
    sanction_entry,
    stored_state,
    unbatch,
)
from modstream.testing.policies import GLOBAL_YAML, approval, authorship, global_document, promotion
from modstream.testing.records import (
    NOTHING_REQUIRED,
    T0,
    TEST_KEYRING,
    appeal_record,
    bank_entry,
    evidence,
    report_record,
    review_decision,
    upload,
)
from modstream.trust import signing


def test_decode_routes_keyed_broadcast_and_invalid_records() -> None:
    decode = Decode(ModerationConfig(keyring=NOTHING_REQUIRED))
    keyed = list(
        decode.process_element(
            Row("content.versions", "c-1", json.dumps(upload()), T0, "content.versions#0"), None
        )
    )
    assert keyed[0][0] == "keyed" and keyed[0][1] == "c-1\x1f1" and keyed[0][4] == T0
    assert keyed[0][6] == "content.versions#0"  # an admitted record moves its lane's time
    bank_key = contract_key("hash.bank", bank_entry())
    broadcast = list(
        decode.process_element(
            Row("hash.bank", bank_key, json.dumps(bank_entry()), T0, "b#0"), None
        )
    )
    assert broadcast[0][0] == "broadcast" and broadcast[0][6] == ""  # never moves event time
    invalid = list(decode.process_element(Row("content.versions", "k", "{nope", 7), None))
    assert invalid[0][0] is DLQ_TAG
    assert json.loads(invalid[0][1][2])["error_class"] == "schema"
    other = list(decode.process_element(Row("moderation.decisions", "k", "{}", 7), None))
    assert other[0][0] is DLQ_TAG  # not an input of this job
    bad_bank = list(decode.process_element(Row("hash.bank", "h", "{}", 7), None))
    assert bad_bank[0][0] is DLQ_TAG  # one DLQ row here, not one per keyed subtask


NOW = T0 + 3_600_000


def refused(topic: str, raw: str, record_ts: int = T0) -> dict[str, Any]:
    """The one DLQ record Decode makes of `raw`, with the processing clock at NOW."""
    decode = Decode(ModerationConfig(now_ms=NOW))
    rows = list(decode.process_element(Row(topic, "transport-key", raw, record_ts, "l#0"), None))
    assert len(rows) == 1 and rows[0][0] is DLQ_TAG, rows
    assert rows[0][1][1] == json.loads(rows[0][1][2])["key"]  # the Kafka key is the DLQ key
    return dict(json.loads(rows[0][1][2]))


def test_keyed_input_stamped_beyond_the_allowed_skew_or_before_2000_is_refused() -> None:
    ahead = refused("moderation.reports", json.dumps(report_record(at=NOW + 300_001)))
    assert ahead["error_class"] == "schema" and "ahead of the processing clock" in ahead["message"]
    assert ahead["key"] == "c-1"  # the record's content_id when known (contract v1.1)
    old = refused("content.versions", json.dumps(upload(at=946_684_799_999)))
    assert "before 2000-01-01" in old["message"]
    rows = list(
        Decode(ModerationConfig(now_ms=NOW)).process_element(
            Row("content.versions", "c-1", json.dumps(upload(at=NOW + 300_000)), 0, "l#0"), None
        )
    )
    assert rows[0][0] == "keyed" and rows[0][4] == NOW + 300_000  # at the bound: admitted


def test_policy_records_may_be_scheduled_ahead_and_never_move_event_time() -> None:
    record = {"event_id": "p", "policy_id": "global", "ts": NOW + 86_400_000}
    rows = list(
        Decode(ModerationConfig(now_ms=NOW)).process_element(
            Row("policy.rules", "global", json.dumps(record), 0, "policy.rules#0"), None
        )
    )
    assert rows[0][0] == "broadcast" and rows[0][4] == NOW + 86_400_000 and rows[0][6] == ""


def test_reevaluation_requests_never_hold_event_time_back() -> None:
    request = {
        "event_id": "re-1",
        "content_id": "c-1",
        "content_version": 1,
        "reason": "policy v2",
        "ts": T0,
    }
    rows = list(
        Decode(ModerationConfig()).process_element(
            Row("moderation.reevaluate", "c-1", json.dumps(request), T0, "reeval#0"), None
        )
    )
    assert rows[0][0] == "keyed" and rows[0][6] == ""


def test_hostile_json_goes_to_the_dlq_once_with_a_class() -> None:
    nested = refused("detector.results", "[" * 50_000 + "]" * 50_000)
    assert nested["error_class"] == "schema" and "nested deeper" in nested["message"]
    two_times = json.dumps(upload(at=T0)).replace('"ts": ', f'"ts": {NOW + 10**11}, "ts": ')
    duplicated = refused("content.versions", two_times)
    assert "duplicated field name 'ts'" in duplicated["message"]
    huge = refused(
        "content.versions",
        json.dumps(upload()).replace('"content_version": 1', '"content_version": ' + str(2**70)),
    )
    assert "64-bit" in huge["message"]
    not_utf8 = list(
        Decode(ModerationConfig()).process_element(Row("content.versions", "k", "\udcff", 0), None)
    )
    assert not_utf8[0][0] is DLQ_TAG


@pytest.mark.parametrize(
    ("topic", "record", "lane"),
    [
        ("content.versions", upload(), "content.versions#0@7"),  # holds event time
        ("detector.results", evidence(), "detector.results#0@7"),
        ("review.decisions", review_decision(), "~review.decisions#0@7"),  # a witness: never
        ("moderation.appeals", appeal_record(), "~moderation.appeals#0@7"),
        ("moderation.reports", report_record(), "~moderation.reports#0@7"),
    ],
)
def test_only_uploads_and_evidence_hold_event_time(
    topic: str, record: dict[str, Any], lane: str
) -> None:
    """Issue 27: a producer of back-dated valid reports (or reviews, appeals) held every
    decision. Human input carries a witness lane (ValidatedTime.WITNESS): applied at its ts,
    never holding event time."""
    decode = Decode(ModerationConfig(now_ms=NOW, keyring=TEST_KEYRING))
    raw = json.dumps(signing.signed(topic, record, TEST_KEYRING))
    rows = list(decode.process_element(Row(topic, "k", raw, T0, f"{topic}#0@7"), None))
    assert len(rows) == 1 and rows[0][0] in ("keyed", "report"), rows
    assert rows[0][6] == lane


def test_an_input_whose_step_fails_is_set_aside_and_the_others_apply(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy = yaml.safe_load(GLOBAL_YAML.read_text())
    adapter, runtime_context, ctx = moderate(ModerationConfig(trusted_policy=policy))
    ctx.key = "c-1\x1f1"
    real_step = Moderate._step

    # The operator's own method is replaced, not `moderation.step`: a compiled caller
    # (modstream/core/native.py) calls a compiled function directly, never through its module.
    def failing_step(self: Moderate, state: Any, topic: str, *args: Any) -> Any:
        if topic == "detector.results":
            if state is not None:
                state.decision_revision = 99  # a half-applied input must not survive
            raise RecursionError("maximum recursion depth exceeded")
        return real_step(self, state, topic, *args)

    monkeypatch.setattr(Moderate, "_step", failing_step)
    upload_row = decoded(
        "content.versions", upload(surface="comment", modality="text", mime_type="text/plain")
    )
    adapter.process_element(upload_row, ctx)
    adapter.process_element(decoded("detector.results", evidence(at=T0)), ctx)
    outputs = list(adapter.on_timer(T0, ctx))
    letters = [json.loads(o[2]) for o in outputs if o[0] == "moderation.dlq"]
    assert [(x["error_class"], x["source_topic"], x["key"]) for x in letters] == [
        ("permanent", "detector.results", "c-1")
    ]
    assert "RecursionError" in letters[0]["message"]
    assert any(o[0] == "moderation.decisions" for o in outputs)  # the upload still decided
    state = stored_state(runtime_context)
    assert state.decision_revision == 1


def test_a_deadline_between_two_inputs_of_one_batch_fires_between_them() -> None:
    """One batch (a watermark far past both) gives what one input per watermark gives: the
    version's deadline (T0 + 5 s) decides before the evidence stamped after it is applied."""
    policy = yaml.safe_load(GLOBAL_YAML.read_text())
    text = upload(surface="comment", modality="text", mime_type="text/plain")
    late = evidence(at=T0 + 6000)
    stepwise, _, ctx = moderate(ModerationConfig(trusted_policy=policy))
    stepwise.process_element(decoded("content.versions", text), ctx)
    one_by_one = list(stepwise.on_timer(T0, ctx)) + list(stepwise.on_timer(T0 + 5000, ctx))
    stepwise.process_element(decoded("detector.results", late), ctx)
    one_by_one += stepwise.on_timer(T0 + 6000, ctx)
    batched, runtime_context, ctx = moderate(ModerationConfig(trusted_policy=policy))
    batched.process_element(decoded("content.versions", text), ctx)
    batched.process_element(decoded("detector.results", late), ctx)
    at_once = list(batched.on_timer(T0 + 6000, ctx))
    assert [trigger for trigger, _, _ in decisions_in(one_by_one)][:2] == ["fast_gate", "deadline"]
    assert decisions_in(at_once) == decisions_in(one_by_one)
    assert [row[0] for row in at_once] == [row[0] for row in one_by_one]
    # The deadline's Flink timer fires later and finds it done.
    due, state = stored(runtime_context.packed.value())
    assert due is not None and T0 + 5000 not in due and state is not None
    assert list(batched.adapter.on_timer(T0 + 5000, ctx)) == []


def _batch_of(*rows: Row) -> Row:
    """EventTimeOrder.java's batch of decoded rows (in the order given)."""
    return Row(*([row[field] for row in rows] for field in (2, 3, 4, 5)))


def test_input_stored_before_the_redesign_is_drained_by_its_timer_after_later_input() -> None:
    """Restored from a checkpoint taken before issue 14: an upload still in the operator's own
    buffer, no state yet. Evidence stamped later comes first as a batch (EventTimeOrder fires
    before this operator's watermark moves); the upload's Flink timer then drains the buffer:
    nothing is lost, the evidence waits as early evidence and joins its upload."""
    policy = yaml.safe_load(GLOBAL_YAML.read_text())
    adapter, runtime_context, ctx = moderate(ModerationConfig(trusted_policy=policy))
    text = upload(surface="comment", modality="text", mime_type="text/plain")
    row = decoded("content.versions", text)
    runtime_context.buffer[T0] = json.dumps([[row[2], row[3], 0]])
    ctx.timers.registered.add(T0)
    ctx.timers.watermark = T0 + 10
    later = _batch_of(decoded("detector.results", evidence(at=T0 + 10)))
    assert unbatch(adapter.adapter.process_element(later, ctx)) == []  # no upload yet
    outputs = unbatch(adapter.adapter.on_timer(T0, ctx))
    decided = decisions_in(outputs)
    assert [trigger for trigger, _, _ in decided] == ["fast_gate", "evidence"]
    assert decided[-1][1] == "ALLOW"  # the evidence joined its upload
    assert runtime_context.buffer == {}
    assert stored_state(runtime_context).decision_revision == 2


def test_a_version_stored_before_the_redesign_keeps_its_input_waiting_for_flink_timers() -> None:
    """State in the old shape (no `due`): its Flink timers are not known here, so a batch for
    it waits in `buffer` with a timer per ts and runs on them, as before issue 14."""
    policy = yaml.safe_load(GLOBAL_YAML.read_text())
    adapter, runtime_context, ctx = moderate(ModerationConfig(trusted_policy=policy))
    text = upload(surface="comment", modality="text", mime_type="text/plain")
    list(adapter.process_element(decoded("content.versions", text), ctx))
    list(adapter.on_timer(T0, ctx))
    runtime_context.version.current = jsonio.dumps(to_document(stored_state(runtime_context)))
    runtime_context.packed.clear()  # as a job before issue 14 stored it
    ctx.timers.watermark = T0 + 10
    batch = _batch_of(decoded("detector.results", evidence(at=T0 + 10)))
    assert unbatch(adapter.adapter.process_element(batch, ctx)) == []
    assert T0 + 10 in runtime_context.buffer and T0 + 10 in ctx.timers.registered
    decided = decisions_in(unbatch(adapter.adapter.on_timer(T0 + 10, ctx)))
    assert decided == [("evidence", "ALLOW", 2)]
    assert stored(runtime_context.packed.value())[0] is None  # still the old shape
    assert runtime_context.version.value() is None  # read once, kept packed since


def test_input_waits_for_its_timer_then_decides_and_state_is_stored() -> None:
    policy = yaml.safe_load(GLOBAL_YAML.read_text())
    adapter, runtime_context, ctx = moderate(ModerationConfig(trusted_policy=policy))
    row = decoded(
        "content.versions", upload(surface="comment", modality="text", mime_type="text/plain")
    )
    assert list(adapter.process_element(row, ctx)) == []  # held until the watermark
    assert adapter.held == [row] and not ctx.timers.registered
    outputs = list(adapter.on_timer(T0, ctx))
    topics = [out[0] for out in outputs]
    assert topics == [
        "moderation.decisions",
        "moderation.actions",
        "user.notifications",
        "moderation.index",
        "scan.requests.text",  # planned after the fast gate decided (modstream/scanning/plan.py)
    ]
    assert adapter.held == [] and runtime_context.buffer == {}
    state = stored_state(runtime_context)
    assert state.decision_revision == 1 and state.deadline == T0 + 5000
    assert {T0 + 5000} <= ctx.timers.registered
    adapter.process_element(decoded("detector.results", evidence(at=T0 + 10)), ctx)
    decided = [json.loads(o[2]) for o in adapter.on_timer(T0 + 10, ctx)]
    assert decided[0]["trigger"] == "evidence" and decided[0]["outcome"] == "ALLOW"


def test_broadcast_records_change_the_policy_from_their_ts_and_rejections_go_to_the_dlq() -> None:
    policy = yaml.safe_load(GLOBAL_YAML.read_text())
    adapter, _, ctx = moderate(
        ModerationConfig(trusted_policy=policy, policy_key="k", keyring=TEST_KEYRING)
    )
    strict = {
        "event_id": "p2",
        "policy_id": "global",
        "version": 2,
        "parent_version": 1,
        "mode": "active",
        "author": "alice",
        "ts": T0 + 100,
        "document": global_document(2, default="PENDING"),
    }
    strict["authorship"] = authorship(strict["document"])
    strict["approvals"] = [approval(strict["document"])]
    strict["promotion"] = promotion(strict["document"])
    strict["signature"] = sign(strict, b"k")
    forged = dict(strict, event_id="p3", version=3, document=global_document(3, default="ALLOW"))
    assert (
        list(
            adapter.process_broadcast_element(
                Row("broadcast", "policy.rules", "policy.rules", json.dumps(strict), T0 + 100), ctx
            )
        )
        == []
    )
    letters = list(
        adapter.process_broadcast_element(
            Row("broadcast", "policy.rules", "policy.rules", json.dumps(forged), T0 + 200), ctx
        )
    )
    assert json.loads(letters[0][2])["error_class"] == "signature"
    assert ctx.broadcast["revision"] == "1"  # state written for checkpoints and other tasks
    # A fresh adapter instance (another subtask, or after restore) rebuilds the same store.
    other, _, _ = moderate(
        ModerationConfig(trusted_policy=policy, policy_key="k", keyring=TEST_KEYRING)
    )
    store, _ = other._load(ctx.broadcast)
    assert store.resolve("global", T0 + 99, "c").decide.version == 1  # type: ignore[union-attr]
    assert store.resolve("global", T0 + 100, "c").decide.version == 2  # type: ignore[union-attr]


def report_row(reporter: str, at: int, seq: int, version_key: str = "c-1\x1f1") -> Row:
    record = {
        "event_id": f"rep-{reporter}-{at}",
        "report_id": f"r-{reporter}",
        "content_id": "c-1",
        "content_version": 1,
        "reporter_id": reporter,
        "reason": "spam",
        "ts": at,
        "_modstream_weight": 1.0,
        "_modstream_new_reporter": False,
        "_modstream_seq": seq,
    }
    return Row("keyed", f"{version_key}\x1f3", "moderation.reports", json.dumps(record), at, seq)


def test_reports_of_one_window_become_one_batch_for_the_version() -> None:
    combine = ReportCombine()
    runtime_context = FakeRuntimeContext()
    combine.open(runtime_context)  # type: ignore[arg-type]
    ctx = FakeContext(FakeMapState(), FakeTimers(), key="c-1\x1f1\x1f3")
    for reporter, at, seq in (("b", T0 + 20, 2), ("a", T0 + 10, 1), ("c", T0 + 1500, 3)):
        assert list(combine.process_element(report_row(reporter, at, seq), ctx)) == []
    assert ctx.timers.registered == {T0 + 999, T0 + 1999}
    [batch] = list(combine.on_timer(T0 + 999, ctx))
    assert (batch[0], batch[1], batch[2], batch[4]) == ("keyed", "c-1\x1f1", REPORT_BATCH, T0 + 999)
    assert [item[:3] for item in json.loads(batch[3])] == [
        [T0 + 10, 1, "rep-a-" + str(T0 + 10)],
        [T0 + 20, 2, "rep-b-" + str(T0 + 20)],
    ]
    assert len(runtime_context.buffer) == 1  # the next window waits for its own timer
    assert len(list(combine.on_timer(T0 + 1999, ctx))) == 1 and runtime_context.buffer == {}


def test_batched_reports_are_applied_in_order_in_one_state_write() -> None:
    policy = yaml.safe_load(GLOBAL_YAML.read_text())
    adapter, runtime_context, ctx = moderate(ModerationConfig(trusted_policy=policy))
    adapter.process_element(
        decoded(
            "content.versions", upload(surface="comment", modality="text", mime_type="text/plain")
        ),
        ctx,
    )
    list(adapter.on_timer(T0, ctx))
    batches = [
        [[T0 + 30, 0, f"rep-{r}", report_row(r, T0 + 30, 0)[3]] for r in ("c",)],
        [[T0 + 10, 0, f"rep-{r}", report_row(r, T0 + 10, 0)[3]] for r in ("a", "b")],
    ]
    for batch in batches:  # two shards' batches for the same window, in any order
        adapter.process_element(
            Row("keyed", "c-1\x1f1", REPORT_BATCH, json.dumps(batch), T0 + 999, 0), ctx
        )
    outputs = [json.loads(o[2]) for o in adapter.on_timer(T0 + 999, ctx)]
    task = next(o for o in outputs if "task_id" in o)
    assert task["queue"] == "reports" and task["ts"] == T0 + 30  # the third reporter's report
    decision = next(o for o in outputs if "decision_id" in o)
    assert (decision["trigger"], decision["ts"]) == ("report", T0 + 30)
    state = stored_state(runtime_context)
    assert sorted(state.reporters) == ["a", "b", "c"]


def test_decisions_for_the_sanctions_operator_carry_the_time_they_were_emitted() -> None:
    policy = yaml.safe_load(GLOBAL_YAML.read_text())
    adapter, _, ctx = moderate(ModerationConfig(trusted_policy=policy))
    adapter.process_element(
        decoded(
            "content.versions", upload(surface="comment", modality="text", mime_type="text/plain")
        ),
        ctx,
    )
    list(adapter.on_timer(T0, ctx))
    adapter.process_element(
        decoded(
            "detector.results",
            evidence(at=T0 + 10, scores={"offensive": 0.99}),
        ),
        ctx,
    )
    side = [o for o in adapter.on_timer(T0 + 10, ctx) if o[0] == "_sanctions"]
    assert len(side) == 1 and side[0][1] == "author-1"
    assert json.loads(side[0][2])["at"] == T0 + 10  # the time the sanctions buffer waits for


def test_sanctions_apply_decisions_in_a_fixed_order_and_clear_their_state() -> None:
    results = []
    for order in (("c-1", "c-2", "c-3"), ("c-3", "c-1", "c-2")):
        adapter = Sanctions(ModerationConfig())
        runtime_context = FakeRuntimeContext()
        adapter.open(runtime_context)  # type: ignore[arg-type]
        ctx = FakeContext(FakeMapState(), FakeTimers(), key="author-1")
        for content_id in order:  # as subtasks of the version operator interleave
            row = Row("_sanctions", "author-1", sanction_entry(content_id, T0, T0 + 5))
            adapter.process_element(row, ctx)
        outputs = [json.loads(o[2]) for o in adapter.on_timer(T0 + 5, ctx)]
        results.append([(o["sanction"], o["content_id"], o["strike_count"]) for o in outputs])
        assert runtime_context.buffer == {}
        expiry = max(ctx.timers.registered)
        assert list(adapter.on_timer(expiry, ctx)) == []
        assert runtime_context.version.value() is None  # every strike aged out: state cleared
    assert results[0] == results[1]
    assert results[0][-1] == ("posting_suspended", "c-3", 3)


def forged_authority_records() -> dict[str, dict[str, Any]]:
    """One record per authority topic, each signed with the wrong key."""
    records = {
        "review.decisions": review_decision(),
        "hash.bank": bank_entry(),
        "moderation.appeals": appeal_record(),
        "detector.results": evidence(),
    }
    return {topic: {**r, "signature": sign(r, b"not-the-key")} for topic, r in records.items()}


def test_forged_authority_records_are_refused_with_class_signature() -> None:
    decode = Decode(ModerationConfig(keyring=TEST_KEYRING))
    assert TEST_KEYRING.required >= set(forged_authority_records())  # the test stack requires
    for topic, record in forged_authority_records().items():
        key = contract_key(topic, record)
        rows = list(decode.process_element(Row(topic, key, json.dumps(record), T0, "l#0"), None))
        assert rows[0][0] is DLQ_TAG, topic
        letter = json.loads(rows[0][1][2])
        assert letter["error_class"] == "signature", (topic, letter["message"])
        unsigned = {k: v for k, v in record.items() if k != "signature"}
        rows = list(decode.process_element(Row(topic, key, json.dumps(unsigned), T0, "l#0"), None))
        assert json.loads(rows[0][1][2])["error_class"] == "signature"  # required: unsigned too
        genuine = signing.signed(topic, unsigned, TEST_KEYRING)
        rows = list(decode.process_element(Row(topic, key, json.dumps(genuine), T0, "l#0"), None))
        assert rows[0][0] in ("keyed", "broadcast"), topic


def test_a_reviewer_cannot_decide_as_another() -> None:
    decision = forged_authority_records()["review.decisions"]
    del decision["signature"]
    bob_key = TEST_KEYRING.key_for("bob", "reviewer")
    assert bob_key is not None
    as_alice = {**decision, "signature": sign(decision, bob_key)}  # names alice, bob's key
    rows = list(
        Decode(ModerationConfig(keyring=TEST_KEYRING)).process_element(
            Row("review.decisions", "c-1", json.dumps(as_alice), T0, "l#0"), None
        )
    )
    assert json.loads(rows[0][1][2])["error_class"] == "signature"


def test_the_steps_own_dead_letters_are_keyed_by_content_id() -> None:
    """An appeal while another is active is the step's `conflict` letter: on the DLQ under
    the version's `content_id` (contract v1.1, "DLQ key"), never the internal version key."""
    policy = yaml.safe_load(GLOBAL_YAML.read_text())
    adapter, _, ctx = moderate(ModerationConfig(trusted_policy=policy))
    ctx.key = "c-1\x1f1"
    adapter.process_element(decoded("content.versions", upload(surface="comment")), ctx)
    list(adapter.on_timer(T0, ctx))
    for index, at in enumerate((T0 + 10, T0 + 20)):
        appeal = {
            "event_id": f"ap-{index}",
            "appeal_id": f"a{index}",
            "content_id": "c-1",
            "content_version": 1,
            "decision_revision": 1,
            "user_id": "author-1",
            "ts": at,
        }
        adapter.process_element(decoded("moderation.appeals", appeal), ctx)
    outputs = list(adapter.on_timer(T0 + 10, ctx)) + list(adapter.on_timer(T0 + 20, ctx))
    [(key, letter)] = [(o[1], json.loads(o[2])) for o in outputs if o[0] == "moderation.dlq"]
    assert (key, letter["key"], letter["error_class"]) == ("c-1", "c-1", "conflict")


def test_the_job_expects_every_partition_of_the_inputs_that_hold_event_time(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from modstream.jobs.moderation import job as job_module
    from modstream.jobs.runtime import JobConfig

    asked: list[list[str]] = []

    def partition_counts(bootstrap: str, names: list[str]) -> dict[str, int]:
        asked.append(list(names))
        return {name: 2 for name in names if not name.endswith("appeals")}  # appeals missing

    monkeypatch.setattr(job_module.topics, "partition_counts", partition_counts)
    job = JobConfig(
        name="moderation",
        bootstrap_servers="b:9092",
        checkpoint_dir=tmp_path,
        transactional_id_prefix="p",
        group_id="g",
        topics={"content.versions": "run1.content.versions"},
    )
    lanes = job_module.expected_lanes(job)
    assert lanes[:2] == ("run1.content.versions#0", "run1.content.versions#1")
    # Only uploads and evidence hold event time: human input and re-evaluation never do.
    assert lanes == (
        "run1.content.versions#0",
        "run1.content.versions#1",
        "detector.results#0",
        "detector.results#1",
    )
    # Parallel readers each read their own partitions: none is expected (documented limit).
    assert job_module.expected_lanes(dataclasses.replace(job, parallelism=2)) == ()
    assert job_module.expected_lanes(job, pre_key_parallelism=2) == ()
    assert len(asked) == 1
    # One event-time instance before the key reads them all, however wide the keyed operators.
    assert job_module.expected_lanes(dataclasses.replace(job, parallelism=2), 1) == lanes
    assert len(asked) == 2


def test_pre_key_parallelism_is_an_option_of_at_least_one() -> None:
    from modstream.jobs.moderation import job as job_module

    parser = job_module.options()
    base = ["--bootstrap-servers", "b:9092"]
    assert parser.parse_args(base).pre_key_parallelism is None
    assert parser.parse_args([*base, "--pre-key-parallelism", "1"]).pre_key_parallelism == 1
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--pre-key-parallelism", "0"])
