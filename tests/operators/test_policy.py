"""Policy documents: validation errors that name the rule, and total, explainable evaluation."""

from __future__ import annotations

import math
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from modstream.policy.evaluate import (
    ContentFacts,
    EvidenceView,
    PolicyError,
    load_policy,
    most_severe,
    warnings,
)
from modstream.testing.policies import GLOBAL_YAML, global_document, minimal_document
from modstream.testing.policies import evidence_view as evidence
from modstream.testing.records import T0

POLICY = load_policy(global_document())
PUBLIC_IMAGE = ContentFacts(
    modality="image",
    surface="public_post",
    mime_type="image/jpeg",
    size_bytes=50_000,
    region="DE",
    audience="all",
    account_risk=0.1,
)
COMMENT_IMAGE = ContentFacts(
    modality="image", surface="comment", mime_type="image/jpeg", size_bytes=50_000
)
COMMENT_TEXT = ContentFacts(
    modality="text", surface="comment", mime_type="text/plain", size_bytes=80
)


def test_most_severe_follows_the_contract_order() -> None:
    assert most_severe(["ALLOW", "RESTRICT", "PROVISIONAL_ALLOW"]) == "RESTRICT"
    assert most_severe(["RESTRICT", "PENDING"]) == "PENDING"
    assert most_severe(["PENDING", "BLOCK", "ALLOW"]) == "BLOCK"
    assert most_severe([]) is None


@pytest.mark.parametrize(
    ("facts", "view", "outcome", "rules", "reasons"),
    [
        (
            PUBLIC_IMAGE,
            evidence(nsfw_image__nsfw=0.97, media_check__malware=0.0),
            "BLOCK",
            ("nsfw-block-public", "nsfw-age-gate"),
            ("sexual_content", "mature_content"),
        ),
        (
            COMMENT_IMAGE,
            evidence(nsfw_image__nsfw=0.8, media_check__malware=0.0),
            "RESTRICT",
            ("nsfw-age-gate",),
            ("mature_content",),
        ),
        (COMMENT_IMAGE, evidence(nsfw_image__nsfw=0.1, media_check__malware=0.0), "ALLOW", (), ()),
        (
            COMMENT_IMAGE,
            evidence(nsfw_image__nsfw=0.1, media_check__malware=1.0),
            "BLOCK",
            ("malware",),
            ("malware",),
        ),
        (
            PUBLIC_IMAGE,
            evidence(nsfw_image__nsfw=0.6),
            "PENDING",
            ("nsfw-borderline-review",),
            ("sexual_content",),
        ),
        (
            COMMENT_TEXT,
            evidence(offensive_text__offensive=0.9),
            "RESTRICT",
            ("offensive-limit",),
            ("harassment",),
        ),
        (
            COMMENT_TEXT,
            evidence(offensive_text__offensive=0.99),
            "BLOCK",
            ("offensive-block", "offensive-limit"),
            ("harassment",),
        ),
    ],
)
def test_matched_rules_most_severe_outcome_and_reasons(
    facts: ContentFacts,
    view: EvidenceView,
    outcome: str,
    rules: tuple[str, ...],
    reasons: tuple[str, ...],
) -> None:
    verdict = POLICY.evaluate(facts, view, ts=T0)
    assert verdict.outcome == outcome
    assert verdict.matched_rules == rules
    assert verdict.reasons == reasons


def test_restrict_carries_its_restriction_and_review_requests() -> None:
    verdict = POLICY.evaluate(COMMENT_IMAGE, evidence(nsfw_image__nsfw=0.8), ts=T0)
    assert verdict.restriction == "age_gate"
    assert [(ask.queue, ask.priority, ask.rule_id) for ask in verdict.review] == [
        ("adult", 2, "nsfw-age-gate")
    ]
    blocked = POLICY.evaluate(PUBLIC_IMAGE, evidence(nsfw_image__nsfw=0.99), ts=T0)
    assert blocked.restriction is None  # only a RESTRICT outcome has one


def test_while_scanning_never_allow_and_the_floor_depends_on_the_surface() -> None:
    high = POLICY.evaluate(PUBLIC_IMAGE, evidence(outstanding=True), ts=T0)
    low = POLICY.evaluate(COMMENT_TEXT, evidence(outstanding=True), ts=T0)
    assert (high.outcome, low.outcome) == ("PENDING", "PROVISIONAL_ALLOW")
    assert low.expires_ts == T0 + 3_600_000
    assert high.reasons == ("scanning",)
    # Media is never public before its integrity gate passed, on any surface (issue 27).
    media = POLICY.evaluate(COMMENT_IMAGE, evidence(outstanding=True), ts=T0)
    assert (media.outcome, media.expires_ts) == ("PENDING", None)
    assert POLICY.fast_gate(COMMENT_IMAGE, ts=T0).outcome == "PENDING"
    assert POLICY.fast_gate(COMMENT_TEXT, ts=T0).outcome == "PROVISIONAL_ALLOW"
    # Partial evidence that already matches something severe decides now.
    early = POLICY.evaluate(
        COMMENT_IMAGE, evidence(outstanding=True, media_check__malware=1.0), ts=T0
    )
    assert early.outcome == "BLOCK"


def test_absent_scanning_and_unknown_sections_fail_closed() -> None:
    policy = load_policy(minimal_document())
    facts = ContentFacts(modality="image", surface="comment")
    assert policy.evaluate(facts, evidence(outstanding=True), ts=T0).outcome == "PENDING"
    assert (
        policy.evaluate(facts, evidence(unknown=frozenset({"nsfw_image"})), ts=T0).outcome
        == "PENDING"
    )
    assert policy.evaluate(facts, evidence(nsfw_image__nsfw=0.1), ts=T0).outcome == "ALLOW"


def test_unknown_evidence_is_never_safe() -> None:
    view = evidence(unknown=frozenset({"nsfw_image"}), media_check__malware=0.0)
    high = POLICY.evaluate(PUBLIC_IMAGE, view, ts=T0)
    assert high.outcome == "PENDING"
    assert "unknown-high-risk-visual" in high.matched_rules
    low = POLICY.evaluate(COMMENT_IMAGE, view, ts=T0)
    assert low.outcome == "PENDING"  # media: the image's own `unknown` floor, and a human looks
    assert low.matched_rules == ("unknown-media",)
    text = POLICY.evaluate(COMMENT_TEXT, evidence(unknown=frozenset({"offensive_text"})), ts=T0)
    assert (text.outcome, text.reasons) == ("PROVISIONAL_ALLOW", ("evidence_unknown",))


@pytest.mark.parametrize("bad", [math.nan, math.inf, -0.5, 1.5, "0.9", None, True])
def test_broken_scores_make_the_detector_unknown(bad: Any) -> None:
    view = EvidenceView(scores={("nsfw_image", "nsfw"): bad, ("media_check", "malware"): 0.0})
    verdict = POLICY.evaluate(PUBLIC_IMAGE, view, ts=T0)
    assert verdict.outcome == "PENDING"  # fail closed on a high-risk surface
    assert "unknown-high-risk-visual" in verdict.matched_rules


def test_hash_bank_match_decides_without_waiting() -> None:
    verdict = POLICY.evaluate(
        PUBLIC_IMAGE, evidence(outstanding=True), ts=T0, hash_matches=["known_bad", "not_in_policy"]
    )
    assert verdict.outcome == "BLOCK"
    assert verdict.matched_rules == ("hash_bank:known_bad",)
    assert verdict.reasons == ("known_match",)
    spam = POLICY.evaluate(
        COMMENT_IMAGE, evidence(nsfw_image__nsfw=0.0), ts=T0, hash_matches=["spam_campaign"]
    )
    assert (spam.outcome, spam.restriction) == ("RESTRICT", "reduced_reach")


@pytest.mark.parametrize(
    ("facts", "reason"),
    [
        (
            ContentFacts(modality="image", surface="comment", mime_type="image/bmp", size_bytes=10),
            "limit_mime_type",
        ),
        (
            ContentFacts(
                modality="image", surface="comment", mime_type="image/png", size_bytes=30_000_000
            ),
            "limit_size",
        ),
    ],
)
def test_failed_limits_are_pending_before_any_model(facts: ContentFacts, reason: str) -> None:
    verdict = POLICY.evaluate(facts, evidence(nsfw_image__nsfw=0.99), ts=T0)
    assert (verdict.outcome, verdict.limit_failed, verdict.reasons) == ("PENDING", True, (reason,))
    assert verdict.matched_rules == ()


def test_a_human_outcome_overrides_rules() -> None:
    verdict = POLICY.evaluate(
        PUBLIC_IMAGE, evidence(nsfw_image__nsfw=0.99), ts=T0, human_outcome=("ALLOW", "reviewed_ok")
    )
    assert (verdict.outcome, verdict.reasons, verdict.matched_rules) == (
        "ALLOW",
        ("reviewed_ok",),
        (),
    )


def test_pause_makes_every_new_decision_at_least_pending() -> None:
    calm = evidence(nsfw_image__nsfw=0.0, media_check__malware=0.0)
    assert POLICY.evaluate(COMMENT_IMAGE, calm, ts=T0, paused=True).outcome == "PENDING"
    assert (
        POLICY.evaluate(COMMENT_IMAGE, calm, ts=T0, paused=True).reasons[-1] == "publication_paused"
    )
    blocked = POLICY.evaluate(PUBLIC_IMAGE, evidence(nsfw_image__nsfw=0.99), ts=T0, paused=True)
    assert blocked.outcome == "BLOCK"


def test_reports_over_the_threshold_ask_for_review_but_do_not_change_the_outcome() -> None:
    facts = ContentFacts(modality="text", surface="comment", mime_type="text/plain", report_count=3)
    verdict = POLICY.evaluate(facts, evidence(offensive_text__offensive=0.1), ts=T0)
    assert verdict.outcome == "ALLOW"
    assert [ask.queue for ask in verdict.review] == ["reports"]


def test_only_candidate_rules_are_evaluated() -> None:
    rules = [
        {"id": f"r{i}", "when": f"score('d{i}', 'x') >= 0.5", "outcome": "BLOCK"} for i in range(50)
    ]
    rules.append({"id": "always", "when": "surface == 'dm'", "outcome": "PENDING"})
    policy = load_policy(minimal_document(rules=rules))
    from modstream.policy.expr import EvalContext

    context = EvalContext(scores={("d7", "x"): 0.6, ("d9", "x"): 0.4})
    assert policy.candidates(context) == [7, 50]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"rules": [{"id": "a", "when": "surface.x", "outcome": "BLOCK"}]},
            "rule 'a' (rules[0]).when: line 1, column 1: attribute access not allowed",
        ),
        (
            {"rules": [{"id": "a", "when": "true", "outcome": "NUKE"}]},
            "rule 'a' (rules[0]).outcome: Input should be",
        ),
        (
            {"rules": [{"id": "a", "when": "true", "outcome": "RESTRICT"}]},
            "rule 'a' (rules[0]): Value error, outcome RESTRICT needs a restriction",
        ),
        (
            {"rules": [{"id": "a", "when": "true", "outcome": "BLOCK", "restriction": "x"}]},
            "restriction is only allowed with outcome RESTRICT",
        ),
        (
            {
                "rules": [
                    {"id": "a", "when": "true", "outcome": "BLOCK"},
                    {"id": "a", "when": "false", "outcome": "BLOCK"},
                ]
            },
            "rule 'a' (rules[1]): duplicate rule id",
        ),
        (
            {"rules": [{"id": "a", "when": "hash_match('nope')", "outcome": "BLOCK"}]},
            "rule 'a' (rules[0]).when: line 1, column 12: unknown hash bank 'nope'",
        ),
        (
            {"rules": [{"id": "a", "when": "true", "outcome": "BLOCK", "colour": "red"}]},
            "rule 'a' (rules[0]).colour: Extra inputs are not permitted",
        ),
        ({"default": "MAYBE"}, "default: Input should be"),
        ({"detectors": {"smell": {"required": ["x"], "deadline_ms": 1}}}, "detectors.smell"),
        ({"detectors": {"image": {"required": [], "deadline_ms": 1}}}, "detectors.image.required"),
        ({"version": "3"}, "version: Input should be a valid integer"),
        (
            {
                "strikes": {
                    "reasons": ["x"],
                    "window_days": 90,
                    "sanctions": [
                        {"at": 5, "sanction": "account_suspended"},
                        {"at": 3, "sanction": "posting_suspended"},
                    ],
                }
            },
            "ascending",
        ),
        (
            {
                "strikes": {
                    "reasons": ["x"],
                    "window_days": 90,
                    "sanctions": [{"at": 3, "sanction": "shadow_ban"}],
                }
            },
            "strikes.sanctions.0.sanction",
        ),
        ({"notices": {"x": ""}}, "notices.x"),
        ({"scanning": {"high_risk": "MAYBE"}}, "scanning.high_risk"),
        ({"phash_max_distance": 65}, "phash_max_distance"),
        ({"hash_banks": {"b": {"outcome": "BLOCK"}}}, "hash_banks.b.reason: Field required"),
    ],
)
def test_validation_errors_name_the_rule_or_section(change: dict[str, Any], expected: str) -> None:
    with pytest.raises(PolicyError) as caught:
        load_policy(minimal_document(**change))
    assert any(expected in problem for problem in caught.value.problems), caught.value.problems


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"scanning": {"high_risk": "ALLOW"}}, "scanning.high_risk"),
        ({"scanning": {"default": "ALLOW"}}, "scanning.default"),
        ({"unknown": {"high_risk": "ALLOW"}}, "unknown.high_risk"),
        ({"unknown": {"default": "ALLOW"}}, "unknown.default"),
        ({"hash_banks": {"b": {"outcome": "ALLOW", "reason": "r"}}}, "hash_banks.b.outcome"),
    ],
)
def test_allow_is_refused_while_evidence_is_incomplete(change: dict[str, Any], field: str) -> None:
    """Contract v1.1: ALLOW is never a scanning, unknown or hash-bank outcome."""
    with pytest.raises(PolicyError) as caught:
        load_policy(minimal_document(**change))
    refused = [p for p in caught.value.problems if p.startswith(f"{field}: ")]
    assert len(refused) == 1 and "ALLOW is refused" in refused[0], caught.value.problems


@pytest.mark.parametrize("outcome", ["PROVISIONAL_ALLOW", "PENDING", "RESTRICT", "BLOCK"])
def test_every_other_outcome_is_accepted_where_allow_is_refused(outcome: str) -> None:
    bank = {"outcome": outcome, "reason": "r"}
    if outcome == "RESTRICT":
        bank["restriction"] = "age_gate"
    text = {"text": {"required": ["offensive_text"], "deadline_ms": 5000}}
    document = minimal_document(
        scanning={"high_risk": outcome, "default": outcome},
        unknown={"high_risk": outcome, "default": outcome},
        hash_banks={"b": bank},
        # A public floor is refused for media (test_media_is_never_public_before_its_gate).
        **({"detectors": text} if outcome == "PROVISIONAL_ALLOW" else {}),
    )
    policy = load_policy(document).document
    assert (policy.scanning.default, policy.unknown.high_risk) == (outcome, outcome)
    assert policy.hash_banks["b"].outcome == outcome


def test_shipped_policies_validate() -> None:
    """policy_rules/*.yaml still load under the v1.1 refusals."""
    loaded = []
    for path in sorted(GLOBAL_YAML.parent.glob("*.yaml")):
        document = yaml.safe_load(path.read_text())
        if isinstance(document, dict) and "rules" in document:
            loaded.append(load_policy(document).policy_id)
    assert "global" in loaded


def test_every_problem_is_listed_at_once() -> None:
    document = minimal_document(
        rules=[
            {"id": "a", "when": "x.y", "outcome": "BLOCK"},
            {"id": "b", "when": "true", "outcome": "NOPE"},
            {"id": "c", "when": "score('a')", "outcome": "BLOCK"},
        ]
    )
    with pytest.raises(PolicyError) as caught:
        load_policy(document)
    assert len(caught.value.problems) >= 3
    assert {p.split(" ")[1] for p in caught.value.problems} >= {"'a'", "'b'", "'c'"}


def test_required_sections_and_warnings() -> None:
    with pytest.raises(PolicyError, match="rules: Field required"):
        load_policy({"policy_id": "p", "version": 1, "detectors": {}, "default": "ALLOW"})
    with pytest.raises(PolicyError, match="a policy document must be a mapping"):
        load_policy(["not", "a", "mapping"])
    document = load_policy(global_document()).document
    assert warnings(document) == []
    sparse = load_policy(
        minimal_document(rules=[{"id": "a", "when": "true", "outcome": "BLOCK", "reason": "x"}])
    ).document
    assert "notices: no notice for reason 'x' (authors get a generic message)" in warnings(sparse)


_score_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-3, 3),
    st.none(),
    st.text(max_size=3),
    st.booleans(),
)


@settings(max_examples=400, deadline=None)
@given(
    modality=st.sampled_from(["text", "image", "audio", "video", "hologram", ""]),
    surface=st.sampled_from(["public_post", "comment", "dm", "profile", ""]),
    scores=st.dictionaries(
        st.tuples(
            st.sampled_from(["nsfw_image", "offensive_text", "media_check", "other"]),
            st.sampled_from(["nsfw", "offensive", "malware", "corrupt", "x"]),
        ),
        _score_values,
        max_size=8,
    ),
    unknown=st.frozensets(st.sampled_from(["nsfw_image", "offensive_text", "media_check"])),
    outstanding=st.booleans(),
    paused=st.booleans(),
    banks=st.lists(st.sampled_from(["known_bad", "spam_campaign", "zzz"]), max_size=2),
    account_risk=st.floats(allow_nan=True, allow_infinity=True),
    report_count=st.integers(0, 10),
)
def test_evaluation_is_total_and_never_allows_what_is_incomplete(
    modality: str,
    surface: str,
    scores: dict[tuple[str, str], Any],
    unknown: frozenset[str],
    outstanding: bool,
    paused: bool,
    banks: list[str],
    account_risk: float,
    report_count: int,
) -> None:
    facts = ContentFacts(
        modality=modality,
        surface=surface,
        account_risk=account_risk,
        mime_type="image/jpeg",
        report_count=report_count,
    )
    verdict = POLICY.evaluate(
        facts,
        EvidenceView(scores=scores, unknown=unknown, outstanding=outstanding),
        ts=T0,
        hash_matches=banks,
        paused=paused,
    )
    assert verdict.outcome in ("ALLOW", "PROVISIONAL_ALLOW", "PENDING", "RESTRICT", "BLOCK")
    if outstanding or unknown or paused:
        assert verdict.outcome != "ALLOW"
    if verdict.outcome == "PROVISIONAL_ALLOW":
        assert verdict.expires_ts == T0 + 3_600_000


def test_evidence_view_takes_the_highest_score_over_segments() -> None:
    view = EvidenceView.from_segments(
        {
            "nsfw_image": {0: {"nsfw": 0.2}, 1: {"nsfw": 0.96}, 2: {"nsfw": 0.5}},
            "media_check": {None: {"malware": 0.0, "corrupt": math.nan}},
        },
        unknown=["offensive_text"],
        outstanding=False,
    )
    assert view.scores == {("nsfw_image", "nsfw"): 0.96, ("media_check", "malware"): 0.0}
    assert view.unknown == {"offensive_text", "media_check"}
    assert POLICY.evaluate(PUBLIC_IMAGE, view, ts=T0).outcome == "BLOCK"


@settings(max_examples=200, deadline=None)
@given(
    labels=st.dictionaries(
        st.sampled_from(["nsfw_image", "offensive_text", "media_check"]),
        st.dictionaries(st.sampled_from(["nsfw", "malware", "corrupt"]), _score_values),
        max_size=3,
    ),
    surface=st.sampled_from(["public_post", "comment"]),
)
def test_a_view_from_segments_decides_as_the_same_scores_checked_by_evaluate(
    labels: dict[str, dict[str, Any]], surface: str
) -> None:
    """`from_segments` checks the scores once (`checked`); evaluate's own check of a view built
    directly gives the same verdict."""
    view = EvidenceView.from_segments({d: {(0, "v1"): scores} for d, scores in labels.items()})
    raw = {(d, label): value for d, scores in labels.items() for label, value in scores.items()}
    unchecked = EvidenceView(scores=raw, unknown=frozenset())
    facts = ContentFacts(modality="image", surface=surface, mime_type="image/jpeg")
    assert view.checked and not unchecked.checked
    assert POLICY.evaluate(facts, view, ts=T0) == POLICY.evaluate(facts, unchecked, ts=T0)


MEDIA_FLOORS = {"high_risk": "PENDING", "default": "PENDING"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"scanning": {"default": "PROVISIONAL_ALLOW"}}, "scanning.default"),
        ({"unknown": {"high_risk": "PROVISIONAL_ALLOW"}}, "unknown.high_risk"),
        (
            {
                "detectors": {
                    "image": {
                        "required": ["nsfw_image"],
                        "deadline_ms": 1,
                        "scanning": {"default": "PROVISIONAL_ALLOW"},
                    }
                }
            },
            "detectors.image.scanning.default",
        ),
        (
            {
                "detectors": {"audio": {"required": ["media_check"], "deadline_ms": 1}},
                "unknown": {"default": "PROVISIONAL_ALLOW"},
            },
            "unknown.default",
        ),
        (
            {"hash_banks": {"b": {"outcome": "PROVISIONAL_ALLOW", "reason": "r"}}},
            "hash_banks.b.outcome",
        ),
    ],
)
def test_media_is_never_public_before_its_gate(change: dict[str, Any], field: str) -> None:
    """Issue 27, point 9: a document that would serve media publicly before its integrity
    gate passed is refused, the problem naming the field and the modality."""
    with pytest.raises(PolicyError) as caught:
        load_policy(minimal_document(**change))
    refused = [p for p in caught.value.problems if p.startswith(f"{field}: ")]
    assert len(refused) == 1, caught.value.problems
    assert "public before its integrity gate" in refused[0]


def test_media_keeps_its_own_floors_and_text_the_documents() -> None:
    lenient = {"high_risk": "PENDING", "default": "PROVISIONAL_ALLOW"}
    detectors = {
        "text": {"required": ["offensive_text"], "deadline_ms": 5000},
        "image": {
            "required": ["nsfw_image"],
            "deadline_ms": 1,
            "scanning": MEDIA_FLOORS,
            "unknown": MEDIA_FLOORS,
        },
    }
    policy = load_policy(minimal_document(detectors=detectors, scanning=lenient, unknown=lenient))
    outstanding = evidence(outstanding=True)
    assert policy.evaluate(COMMENT_IMAGE, outstanding, ts=T0).outcome == "PENDING"
    assert policy.evaluate(COMMENT_TEXT, outstanding, ts=T0).outcome == "PROVISIONAL_ALLOW"
    unknown = evidence(unknown=frozenset({"nsfw_image"}))
    assert policy.evaluate(COMMENT_IMAGE, unknown, ts=T0).outcome == "PENDING"


def test_the_shipped_policy_keeps_every_media_off_public_until_its_gate_passed() -> None:
    for modality in ("image", "video", "audio"):
        scanning, unknown = POLICY.floors(modality)
        assert {scanning.high_risk, scanning.default, unknown.high_risk, unknown.default} == {
            "PENDING"
        }, modality
