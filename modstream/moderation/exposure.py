"""The exposure window of one content item: how long a version was shown to users before a
restrictive decision (BLOCK or RESTRICT) took effect on it. docs/enforcement.md, "Exposure
window", defines it; this is the one place it is computed.

Pure Python over a plain dict state per `content_id`, fed by the reconciler's adapter
(modstream/jobs/reconciler.py) with what it reads:
- `content.versions` upserts: the version's `surface` and `region` (the metric's labels);
- `moderation.decisions`: which revisions of the version restrict it (outcome BLOCK or
  RESTRICT, not a deletion) and their `trigger`;
- `content.visibility`: what users could see, with the enforcement side's clock as `ts`.

A version is *shown* from the `ts` of the first content.visibility record that shows it
`public` or `limited`. A restriction *takes effect* at the first content.visibility record of a
restrictive revision whose visibility is stricter than the most open one the version was shown
with (public -> limited or hidden, limited -> hidden). Its exposure is the difference of the two
`ts`. One measure per version, the first restriction that took effect; a version restricted
before it was ever shown has no exposure (`unexposed`, counted, not measured).

The three inputs come from different topics, so any order is handled: a restriction waits in
the state for its decision (or the decision for the restriction) and the measure is made once
both are known. Everything is decided from the records' own fields (no clock), so a replay of
the same records measures the same windows, and a record seen again (a restart re-sends the
visibility of acknowledged actions) measures nothing twice: the version is `done`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from modstream.enforcement.apply import EXPORTED

State = dict[str, Any]
Output = tuple[str, str, dict[str, Any]]

TOPIC = "enforcement.exposure"
RESTRICTIVE = ("BLOCK", "RESTRICT")
# How open a visibility is: a restriction lowers it.
OPENNESS = {"public": 2, "limited": 1, "hidden": 0, "pending": 0}
# What users can see: the visibilities whose media is exported (modstream/enforcement/apply.py).
SHOWN = EXPORTED
# A restriction seen before its decision waits at most this many revisions (bounded state).
MAX_WAITING = 8
# How long a content item's exposure state outlives its last input (the decisions' and actions'
# retention: a restriction later than that cannot be matched to its decision anyway).
STATE_TTL_MS = 30 * 86_400_000
UNKNOWN = "unknown"


@dataclass
class ExposureResult:
    state: State | None  # None: forget this content item
    outputs: list[Output] = field(default_factory=list)
    measured: dict[str, Any] | None = None  # the exposure record made by this step, if any
    unexposed: dict[str, str] | None = None  # labels of a restriction before any showing
    timers: list[int] = field(default_factory=list)


def new_state(content_version: int) -> State:
    return {
        "version": content_version,
        "surface": None,
        "region": None,
        "shown_ts": None,
        "shown_as": None,
        "restrictive": {},  # str(revision) -> {"outcome", "trigger"}
        "waiting": {},  # str(revision) -> {"visibility", "ts"}: a drop not yet matched
        "done": False,
    }


def _for_version(state: State | None, content_version: int) -> State | None:
    """The state to update for a record of `content_version`: a newer version starts afresh
    (an edit is a new version with its own exposure), an older one is ignored (None)."""
    if state is None or content_version > state["version"]:
        return new_state(content_version)
    if content_version < state["version"]:
        return None
    return state


def on_upsert(state: State | None, upsert: dict[str, Any], now: int) -> ExposureResult:
    """An upload's facts: the labels its exposure is reported under."""
    current = _for_version(state, upsert["content_version"])
    if current is None:
        return ExposureResult(state)
    current["surface"] = upsert.get("surface") or current["surface"]
    current["region"] = upsert.get("region") or current["region"]
    return _touch(current, now)


def on_decision(state: State | None, decision: dict[str, Any], now: int) -> ExposureResult:
    """A decision revision: a restrictive one may complete a restriction already seen."""
    outcome = decision["outcome"]
    restrictive = outcome in RESTRICTIVE and decision.get("state") != "deleted"
    if not restrictive:
        if state is None:
            return ExposureResult(None)  # nothing to remember: not shown, not restricted
        current = _for_version(state, decision["content_version"])
        return _touch(current, now) if current is not None else ExposureResult(state)
    current = _for_version(state, decision["content_version"])
    if current is None or current["done"]:
        return ExposureResult(state)
    revision = str(decision["decision_revision"])
    current["restrictive"][revision] = {"outcome": outcome, "trigger": decision["trigger"]}
    result = _touch(current, now)
    drop = current["waiting"].pop(revision, None)
    if drop is not None:
        _restricted(current, decision["content_id"], int(revision), drop, result)
    return result


def on_visibility(state: State | None, record: dict[str, Any], now: int) -> ExposureResult:
    """What users could see: the first showing, or a drop below it (a restriction, once its
    decision says it was restrictive)."""
    current = _for_version(state, record["content_version"])
    if current is None or current["done"]:
        return ExposureResult(state)
    result = _touch(current, now)
    visibility, ts = record["visibility"], record["ts"]
    shown_as = current["shown_as"]
    if visibility in SHOWN and (shown_as is None or OPENNESS[visibility] > OPENNESS[shown_as]):
        current["shown_as"] = visibility
        if current["shown_ts"] is None or ts < current["shown_ts"]:
            current["shown_ts"] = ts
        current["waiting"] = {}  # a drop before this showing did not end it
        return result
    if shown_as is not None and OPENNESS[visibility] >= OPENNESS[shown_as]:
        return result
    revision = str(record["decision_revision"])
    drop = {"visibility": visibility, "ts": ts}
    if revision in current["restrictive"]:
        _restricted(current, record["content_id"], int(revision), drop, result)
    elif revision not in current["waiting"] and len(current["waiting"]) < MAX_WAITING:
        current["waiting"][revision] = drop
    return result


def on_timer(state: State | None, now: int) -> ExposureResult:
    """The state's TTL: forget the item once idle for `STATE_TTL_MS`, else look again then."""
    if state is None:
        return ExposureResult(None)
    expires = int(state.get("touched", now)) + STATE_TTL_MS
    if now >= expires:
        return ExposureResult(None)
    state["expires"] = expires
    return ExposureResult(state, timers=[expires])


def _touch(state: State, now: int) -> ExposureResult:
    """Note the input's processing time; arm the TTL timer once (it re-arms itself)."""
    result = ExposureResult(state)
    state["touched"] = now
    if state.get("expires") is None:
        state["expires"] = now + STATE_TTL_MS
        result.timers.append(state["expires"])
    return result


def _labels(state: State, trigger: str) -> dict[str, str]:
    return {
        "surface": state["surface"] or UNKNOWN,
        "region": state["region"] or UNKNOWN,
        "trigger": trigger,
    }


def _restricted(
    state: State, content_id: str, revision: int, drop: dict[str, Any], result: ExposureResult
) -> None:
    """A restrictive revision in effect: measured when the version had been shown; else the
    version was restricted before anyone saw it (counted once as `unexposed`; should it be
    shown later, after an overturn, its next restriction is measured)."""
    if state["shown_as"] is not None and int(drop["ts"]) >= int(state["shown_ts"]):
        _measure(state, content_id, revision, drop, result)
        return
    if not state.get("unexposed"):
        state["unexposed"] = True
        result.unexposed = _labels(state, state["restrictive"][str(revision)]["trigger"])
    state["waiting"] = {}


def _measure(
    state: State, content_id: str, revision: int, drop: dict[str, Any], result: ExposureResult
) -> None:
    """The version's one exposure record; the version is done, what waited is dropped."""
    decided = state["restrictive"][str(revision)]
    shown_ts = int(state["shown_ts"])
    record = {
        "content_id": content_id,
        "content_version": state["version"],
        "decision_revision": revision,
        "outcome": decided["outcome"],
        **_labels(state, decided["trigger"]),
        "shown_visibility": state["shown_as"],
        "shown_ts": shown_ts,
        "restricted_visibility": drop["visibility"],
        "restricted_ts": int(drop["ts"]),
        "exposure_ms": max(0, int(drop["ts"]) - shown_ts),
        "ts": int(drop["ts"]),
    }
    state["done"] = True
    state["waiting"] = {}
    state["restrictive"] = {}
    result.measured = record
    result.outputs.append((TOPIC, content_id, record))
