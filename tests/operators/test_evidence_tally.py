"""The evidence tallied as it is stored (issue 26 point 1: `VersionState.tally`,
modstream/moderation/evidence_view.py `add_to_tally`): every read from the tally gives what
walking every stored result gives, for any results in any order, and the states it cannot
vouch for (stored before it, results under keys from before issue 12, edited around the rule)
are read result by result."""

from __future__ import annotations

import copy
import math
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from modstream.moderation import state_schema
from modstream.moderation.evidence_view import read_evidence
from modstream.moderation.state import Evidence, VersionState, new_state
from modstream.moderation.tally import add_to_tally, tally_of
from modstream.scanning import plan as scan_plan
from modstream.testing.records import T0
from modstream.testing.versions import CTX, Version, content, image, image_evidence

POLICY = CTX.resolution.decide
DETECTORS = ("nsfw_image", "media_check", "offensive_text")
# Scores as stored: valid floats, ints and bools, and values no detector may send (out of
# range, NaN, text), which break their detector.
SCORES = st.sampled_from([0.0, 0.3, 0.99, 1.0, 0, 1, True, 1.5, -0.25, math.nan, "high", 10**30])
RESULT = st.tuples(
    st.sampled_from(DETECTORS),
    st.sampled_from(["m-1", "m-2"]),
    st.sampled_from([None, 0, 1, 2, 7]),
    st.sampled_from(["ok", "ok", "ok", "error", "timeout"]),
    st.one_of(st.none(), st.dictionaries(st.sampled_from(["a", "b", "nsfw"]), SCORES, max_size=3)),
)


def _state(segments: int, modality: str) -> VersionState:
    state = new_state("c-1", 1)
    state.content = content(T0, modality, mime_type="video/mp4", segments=segments)
    state.tally = {}
    return state


def _store(state: VersionState, result: tuple[Any, ...]) -> bool:
    """As rules/evidence.py stores a result: under its normalized key, a repeat ignored."""
    detector, model, segment, status, scores = result
    key = f"{detector}|{model}|{0 if segment is None else segment}"
    if key in state.evidence:
        return False
    entry = Evidence(detector, model, segment, status, scores)
    state.evidence[key] = entry
    assert state.tally is not None
    add_to_tally(state.tally, entry)
    return True


def _walked(state: VersionState) -> VersionState:
    """The same state without its tally: read result by result."""
    walked = copy.deepcopy(state)
    walked.tally = None
    return walked


def _same_read(tallied: tuple[Any, ...], walked: tuple[Any, ...]) -> None:
    """Two reads alike; NaN is never a best score, so plain equality holds for the scores."""
    view, completeness, results, expired = tallied
    assert view.scores == walked[0].scores
    assert view.unknown == walked[0].unknown
    assert (view.outstanding, view.checked) == (walked[0].outstanding, walked[0].checked)
    assert completeness == walked[1] and results == walked[2] and expired == walked[3]


@settings(max_examples=300, deadline=None)
@given(
    results=st.lists(RESULT, max_size=24),
    segments=st.sampled_from([0, 1, 3]),
    modality=st.sampled_from(["image", "video", "text"]),
    deadline_passed=st.booleans(),
)
def test_a_read_from_the_tally_is_the_read_of_every_result(
    results: list[tuple[Any, ...]], segments: int, modality: str, deadline_passed: bool
) -> None:
    state = _state(segments, modality)
    if deadline_passed:
        state.deadline = T0 + 30_000
    for result in results:
        _store(state, result)
        assert state.tally is not None  # read from the tally, not walked for want of a count
        assert sum(kept.results for kept in state.tally.values()) == len(state.evidence)
        ts = T0 + 60_000
        _same_read(read_evidence(state, POLICY, ts), read_evidence(_walked(state), POLICY, ts))
    # Made at once from what is stored (a state stored before the tally), it is the same tally.
    assert tally_of(state.evidence) == state.tally


@settings(max_examples=300, deadline=None)
@given(
    results=st.lists(RESULT, max_size=24),
    segments=st.sampled_from([0, 1, 3]),
    modality=st.sampled_from(["image", "video"]),
)
def test_the_gate_read_from_the_tally_is_the_gate_read_from_every_result(
    results: list[tuple[Any, ...]], segments: int, modality: str
) -> None:
    """modstream/scanning/plan.py `gate_status`: `failed` and `waiting` come from the tally, and
    the gate's scores are read from the results once every gate detector answered; the walk
    of every result says the same after each result (the shipped policy gates image and video
    on `media_check`)."""
    assert POLICY is not None and scan_plan.gate(POLICY, modality) == ["media_check"]
    state = _state(segments, modality)
    for result in results:
        _store(state, result)
        assert scan_plan.gate_status(state, POLICY) == scan_plan.gate_status(_walked(state), POLICY)


def test_the_tally_counts_segments_failures_and_broken_scores_as_the_walk_reads_them() -> None:
    state = _state(3, "video")
    for result in [
        ("nsfw_image", "m-1", 0, "ok", {"nsfw": 0.4}),
        ("nsfw_image", "m-2", 0, "ok", {"nsfw": 0.9}),  # another model: the best of the two
        ("nsfw_image", "m-1", 7, "ok", {"nsfw": 1.0}),  # out of range: no segment answered
        ("media_check", "m-1", None, "error", None),  # the whole content, failed
        ("offensive_text", "m-1", 1, "ok", {"a": 1.5, "b": 1}),  # broken, and b counts as 1.0
    ]:
        _store(state, result)
    assert state.tally is not None
    nsfw, media, text = (state.tally[name] for name in DETECTORS)
    assert (nsfw.results, nsfw.segments, nsfw.best) == (3, [0, 7], {"nsfw": 1.0})
    assert (media.segments, media.failed, media.best) == ([-1], True, {})
    assert (text.broken, text.best) == (True, {"b": 1.0})
    view, completeness, _, _ = read_evidence(state, POLICY, T0)
    walked_view, walked_completeness, _, _ = read_evidence(_walked(state), POLICY, T0)
    assert completeness == walked_completeness
    assert view.scores == walked_view.scores
    assert view.scores[("nsfw_image", "nsfw")] == 1.0
    assert {"media_check", "offensive_text"} <= view.unknown == walked_view.unknown


def test_results_stored_through_the_step_are_tallied_and_survive_the_stored_bytes() -> None:
    """Evidence read before its upload is tallied again as the fast gate joins it; every
    result after is added; the tally is stored with the version and read back alike."""
    version = Version()
    early = image_evidence("c-1", T0 - 5, segment_id=1)
    version.send("detector.results", early[0])
    assert version.state is not None and version.state.tally is not None
    version.upload(**image(modality="video", mime_type="video/mp4", segments=3))
    for segment in (0, 2):
        for record in image_evidence("c-1", T0 + 10 * segment, segment_id=segment, nsfw=0.5):
            version.send("detector.results", record)
    version.send("detector.results", early[1])
    state = version.state
    assert state is not None and state.tally is not None
    assert state.tally == tally_of(state.evidence)
    assert sorted(state.tally["nsfw_image"].segments) == [0, 1, 2]
    assert version.last["completeness"] == {"required": 6, "received": 6, "unknown": []}
    again = state_schema.load_version(state_schema.dump_version(state))
    assert again == state
    _same_read(
        read_evidence(state, POLICY, T0 + 99), read_evidence(_walked(state), POLICY, T0 + 99)
    )


def test_a_state_stored_before_the_tally_is_tallied_at_its_next_result() -> None:
    """Bytes without the field (a schema 5 state of the job before it) load with no tally and
    are read result by result; the next result makes it from everything stored."""
    version = Version()
    version.upload(**image(surface="comment"))
    nsfw, media = image_evidence("c-1", T0 + 1)
    version.send("detector.results", nsfw)
    assert version.state is not None
    before = msgspec.msgpack.decode(state_schema.dump_version(version.state))
    assert before[-1] is not None  # the tally is the last field
    version.state = state_schema.load_version(msgspec.msgpack.encode(before[:-1]))
    assert version.state.tally is None
    version.send("detector.results", media)
    assert version.state.tally == tally_of(version.state.evidence)
    assert version.state.tally is not None and set(version.state.tally) == {
        "nsfw_image",
        "media_check",
    }
    assert version.last["completeness"]["received"] == 2


def test_keys_from_before_issue_12_are_never_tallied() -> None:
    """Only such keys (`…|None`) can hold two results of one slot, which the walk reads as the
    later key's scores alone: a state holding one keeps no tally, whatever comes after."""
    state = _state(1, "image")
    state.tally = None
    state.evidence["nsfw_image|m-1|None"] = Evidence("nsfw_image", "m-1", None, "ok", {"nsfw": 0.9})
    assert tally_of(state.evidence) is None
    version = Version()
    version.state = state
    version.send("detector.results", image_evidence("c-1", T0 + 1)[1])
    assert version.state is not None and version.state.tally is None


def test_a_tally_that_does_not_count_the_stored_results_is_not_read() -> None:
    """A state edited around the rule (results replaced without their tally) is read result by
    result: the tally is read only when it counts as many results as are stored."""
    state = _state(1, "image")
    _store(state, ("nsfw_image", "m-1", None, "ok", {"nsfw": 0.2}))
    state.evidence = {"nsfw_image|m-1|0": Evidence("nsfw_image", "m-1", None, "ok", {"nsfw": 0.8})}
    state.evidence["media_check|m-1|0"] = Evidence("media_check", "m-1", None, "ok", {})
    view, _, _, _ = read_evidence(state, POLICY, T0)
    assert view.scores == {("nsfw_image", "nsfw"): 0.8}
