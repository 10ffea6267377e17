"""The deadline and its wait: when a deadline passes with evidence missing, the missing
evidence is UNKNOWN and the policy decides; a live job waits for the detectors to have had their
time first, a replay never waits.

Contract: docs/CONTRACT.md, "Outcomes": "When a deadline passes with evidence missing, the
missing evidence is UNKNOWN and the policy decides (fail closed on high-risk surfaces): the
version moves to state `expired` in a new revision with `trigger: deadline`, whose
`completeness.unknown` names each missing detector." "Time": "deadlines are `upsert.ts +
deadline_ms`, checked against the watermark." "v1.1 additions", "Quiet time": deadlines fire on
time when no input arrives; a backfill must not expire everything at once.

Proved by:
    tests/operators/test_moderation.py::test_deadline_with_missing_evidence_expires_naming_the_detector
    tests/operators/test_moderation.py::test_a_deadline_reached_while_catching_up_waits_and_evidence_that_comes_leaves_nothing
    tests/operators/test_moderation.py::test_a_waiting_deadline_decides_at_its_own_ts_when_the_detector_never_answers
    tests/operators/test_moderation.py::test_a_live_deadline_waits_for_the_grace_and_on_time_evidence_leaves_nothing
    tests/operators/test_moderation.py::test_a_deadline_event_time_reached_ahead_of_the_clock_decides_and_never_spins
    tests/operators/test_moderation.py::test_evidence_stamped_after_a_waiting_deadline_comes_after_the_deadline_as_in_replay
    tests/operators/test_moderation.py::test_a_waiting_deadline_decided_after_later_input_still_expires_as_in_replay
    tests/operators/test_moderation.py::test_a_report_stamped_before_a_decided_deadline_does_not_reopen_scanning
    tests/operators/test_moderation.py::test_replay_never_waits
    tests/operators/test_timers.py::test_a_backlog_version_is_decided_as_replay_once_live_within_the_bound
    tests/operators/test_timers.py::test_the_wait_of_a_reached_deadline_has_a_computable_end
    tests/operators/test_timers.py::test_every_wait_ends_by_the_bound_whatever_the_backlogs_age_and_the_lag

The whole rule: armed at the upload (`arm_deadline`, from rules/fast_gate.py), fired when event
time reaches it (`fire`, from modstream/moderation/step.py `on_timer`), waiting while evidence
is outstanding (`postponed`), decided (`decide_deadline`), and decided first when evidence stamped
after a waiting deadline comes (`decide_if_passed`, from rules/evidence.py). What "passed with
evidence missing" means for the evidence view (those detectors UNKNOWN, state `expired`) is read
in modstream/moderation/evidence_view.py `read_evidence`; the policy's outcome for UNKNOWN is
modstream/policy/evaluate.py's.
"""

from __future__ import annotations

from modstream.moderation.decide import decide
from modstream.moderation.evidence_view import read_evidence
from modstream.moderation.rules.provisional import arm_expiry
from modstream.moderation.state import Context, Output, State, StepResult, uploaded
from modstream.policy.evaluate import CompiledPolicy


def arm_deadline(state: State, policy: CompiledPolicy | None) -> list[int]:
    content = uploaded(state)
    deadline = policy.deadline_ms(content.modality) if policy else None
    if deadline is None:
        return []
    state.deadline = content.ts + deadline
    return [state.deadline]


def postponed(state: State, ctx: Context, ts: int) -> int | None:
    """When event time reaches a deadline (`ts`: the deadline, or a postponed firing) with
    evidence missing: the processing time to decide it at, or None to decide now.

    A deadline fires only when the detectors had their full deadline to answer: `deadline_ms`
    of real time since the job asked them (`asked_at`, when it read the upload and sent the scan
    requests) plus `evidence_grace_ms` for an answer to reach the job (the scanner's and this
    job's transactions). Reached while catching up (event time more than the live window behind
    the clock), they get that again from now. Replay (no clock) never waits: its event time is
    the input's alone. Event time past the wait's end decides now: it cannot wait for a clock
    it is ahead of. docs/moderation.md, "Time"."""
    if ctx.clock_ms is None:
        return None
    policy = ctx.resolution.decide
    # Evidence outstanding just before the deadline: asked and not answered (detectors cost
    # ordering never asked are not waited for; a timeout or error is an answer).
    due = state.deadline
    if due is None:
        return None
    view, _, _, _ = read_evidence(state, policy, due - 1, ctx.hash_matches)
    deadline = policy.deadline_ms(uploaded(state).modality) if policy else None
    if deadline is None or not view.outstanding:
        return None
    wait = deadline + ctx.evidence_grace_ms
    target = int(state.asked_at or ctx.clock_ms) + wait
    if ts < ctx.clock_ms - ctx.live_window_ms:
        target = max(target, ctx.clock_ms + wait)
    # Event time already at or past the wait's end (input stamped ahead of the clock, within
    # the allowed future skew): decide now. Re-armed there, the timer fired again at once in
    # the same watermark, over and over until the clock caught up: a loop on the task thread.
    return target if target > max(ctx.clock_ms, ts) else None


def decide_deadline(state: State, ctx: Context) -> list[Output]:
    """The deadline decision, at the deadline's own event time, once it is no longer pending."""
    state.deadline_timer = None
    state.deadline_decided = True
    if state.deadline is None:
        return []
    return decide(state, ctx, state.deadline, "deadline")


def fire(state: State, ts: int, ctx: Context, result: StepResult) -> None:
    """The deadline, if due at `ts` (its own `ts` when it never waited, else its postponed
    firing): wait for the detectors while they have not had their time, else decide."""
    pending = state.deadline_timer
    due = state.deadline is not None and not state.deleted
    if due and ((ts == state.deadline and pending is None) or ts == pending):
        waited = postponed(state, ctx, ts)
        if waited is not None:
            state.deadline_timer = waited
            result.timers.append(waited)
        else:
            result.outputs += decide_deadline(state, ctx)
            # A deadline that waited decides after later input: its PROVISIONAL_ALLOW can
            # expire before the expiry already armed (or already be past it).
            result.timers += arm_expiry(state)


def decide_if_passed(state: State, ts: int, ctx: Context) -> list[Output]:
    """Input stamped after a deadline that still waits: the detector did not answer in time, so
    the deadline decides first, as in replay, and the input after it."""
    if state.deadline_timer is not None and state.deadline is not None and ts > state.deadline:
        return decide_deadline(state, ctx)
    return []
