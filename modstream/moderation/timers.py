"""The time-driven rules of one content version, each with its arming and its firing: the
deadline (and its wait for the detectors), the provisional expiry, the state TTL, retirement
to a compact record and a deleted version's tombstone (docs/moderation.md, "Time" and
"Retention"). modstream/moderation/step.py `on_timer` fires them; the handlers arm them.
"""

from __future__ import annotations

import msgspec

from modstream.moderation.decide import decide
from modstream.moderation.state import Context, Output, State, StepResult, new_state, uploaded
from modstream.moderation.verdict import incomplete, read_evidence
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


def arm_expiry(state: State) -> list[int]:
    """The timer for the provisional expiry in force: one armed at a time, as for the TTL. A
    later expiry waits for the armed timer, which re-arms it when it fires (`on_timer`)."""
    expiry, armed = state.expiry, state.expiry_timer
    if expiry is None or (armed is not None and armed <= expiry):
        return []
    state.expiry_timer = expiry
    return [expiry]


def expire_provisional(state: State, ts: int, ctx: Context) -> StepResult:
    """The provisional expiry timer fired: decide again (contract v1.1, trigger `deadline`)
    when the PROVISIONAL_ALLOW in force reached its `expires_ts` with evidence incomplete or
    unknown; re-arm for a later `expires_ts`; else nothing (complete evidence is not touched).
    `provisional_expired` is set once, so the chain ends with this firing."""
    result = StepResult(state)
    state.expiry_timer = None
    expiry = state.expiry
    if expiry is None or state.deleted or state.content is None:
        return result
    if ts < expiry:
        result.timers += arm_expiry(state)
        return result
    policy = ctx.resolution.decide
    _, completeness, _, _ = read_evidence(state, policy, ts)
    if state.human is not None or not incomplete(completeness):
        state.expiry = None
        return result
    if state.deadline_timer is not None and state.deadline is not None and state.deadline <= expiry:
        # The deadline before this expiry still waits for the detectors: it decides first, as
        # in replay, and arms the expiry then in force when it does (`on_timer`). Left to its
        # own shorter wait, the fast gate's expiry decided first and the deadline's revision
        # never came (issue 32).
        return result
    if ctx.clock_ms is not None and ts < ctx.clock_ms - ctx.live_window_ms:
        # Reached while the job catches up on a backlog: the evidence it is reading may complete
        # the version. Looked at again once event time is live (contract v1.1, "Quiet time": a
        # backfill must not expire everything at once).
        state.expiry_timer = ctx.clock_ms + ctx.evidence_grace_ms
        result.timers.append(state.expiry_timer)
        return result
    state.expiry = None
    state.provisional_expired = True
    result.outputs += decide(state, ctx, expiry, "deadline")
    return result


def overdue_since(state: State) -> int | None:
    """The event time of the oldest rule this version reached and has not decided yet: a
    deadline waiting for the detectors (its `ts`) or a provisional expiry waiting for live event
    time (its `expires_ts`); None when none waits. The waiting-past-deadline gauges read it."""
    waiting = []
    if state.deadline_timer is not None and state.deadline is not None:
        waiting.append(state.deadline)
    expiry, armed = state.expiry, state.expiry_timer
    if expiry is not None and armed is not None and armed > expiry:  # re-armed: it waits
        waiting.append(expiry)
    return min(waiting, default=None)


def ttl_waits(state: State, ts: int) -> list[int]:
    """The state TTL reached while a deadline or provisional expiry before it in event time
    still waits (a backlog older than the TTL, read by a live job): the TTL fires again after
    those waits end, so the version is retired (or cleared) only once they decided, as in
    replay. Replay never waits, so there the TTL is never held. Nothing waits: []."""
    ttl = state.ttl
    if ttl is None:
        return []
    waits = []
    if state.deadline_timer is not None and state.deadline is not None and state.deadline <= ttl:
        waits.append(state.deadline_timer)
    expiry, armed = state.expiry, state.expiry_timer
    if expiry is not None and armed is not None and expiry <= ttl:
        waits.append(armed)  # armed at or before `ts` (just armed, long past): fires first
    if not waits:
        return []
    state.ttl_timer = max(*waits, ts + 1)
    return [state.ttl_timer]


def arm_ttl(state: State, ts: int, ttl_ms: int, *, replace: bool = False) -> list[int]:
    """Keep the state until `ttl_ms` after the latest input. One timer is armed at a time
    (not one per input: each firing loads the state); when it fires early it re-arms."""
    state.ttl = ts + ttl_ms if replace else max(state.ttl or 0, ts + ttl_ms)
    armed = state.ttl_timer
    if armed is None or state.ttl < armed:
        state.ttl_timer = state.ttl
        return [state.ttl]
    return []


# What a deleted version's tombstone keeps: its identity, the event ids that make late and
# duplicate input a no-op, the revision and last decision (so nothing is decided twice), the
# active appeal's id, and its TTL. Nothing that holds or derives from the content (facts,
# hashes, evidence, scores, a reviewer's reason) survives the delete.
TOMBSTONE_KEEPS = (
    "content_id", "content_version", "events", "decision_revision", "last_decision", "appeal_id",
    "deleted", "ttl", "ttl_timer",
)  # fmt: skip


def compact_tombstone(state: State) -> None:
    """A deleted version keeps only what ignores late input (`TOMBSTONE_KEEPS`)."""
    keep_only(state, TOMBSTONE_KEEPS)
    if state.last_decision is not None:  # reason codes and evidence refs go with the content
        state.last_decision = msgspec.structs.replace(
            state.last_decision, reasons=None, evidence_refs=None
        )


def keep_only(state: State, kept: tuple[str, ...]) -> None:
    """Every field of `state` but `kept` back at its default, in place."""
    fresh = new_state(state.content_id, state.content_version)
    for name in state.__struct_fields__:
        if name not in kept:
            setattr(state, name, getattr(fresh, name))


# What a retired version keeps (`retire`): enough to apply a review or an appeal and decide it
# again with the same revision numbers, the evidence it was decided on included, and the digests
# of the human inputs applied (a re-sent review or appeal stays a duplicate:
# modstream/moderation/appeals_and_reviews.py). Input event ids, reporters, shadow decisions and
# timers go.
RETIRED_KEEPS = (
    "content_id", "content_version", "content", "evidence", "report_weight", "human", "human_ids",
    "appeal_id", "decision_revision", "last_decision", "tasks", "open_tasks",
    "provisional_expired", "leases", "task_queues", "second", "escalation_task",
)  # fmt: skip


def retire(state: State, ts: int, ctx: Context) -> StepResult:
    """The full state's TTL passed: keep the compact record for `review_retention_ms`, every
    other field at its default; the content's hashes go (bank retroaction reaches retained full
    states only)."""
    keep_only(state, RETIRED_KEEPS)
    if state.content is not None:
        state.content = msgspec.structs.replace(state.content, sha256=None, phash=None)
    ttl = ts + ctx.review_retention_ms
    state.retired, state.ttl, state.ttl_timer = True, ttl, ttl
    return StepResult(state, timers=[ttl])
