"""Policy documents as authors write them: the sections (CONTRACT.md, "Policy document"), their
validation, and the problems `load_policy` (modstream/policy/evaluate.py) reports, each naming its
rule and position. Kept apart from evaluation, which reads only the compiled form.

Contract: docs/CONTRACT.md, "Policy document" (the sections and what each means; "Anything
else is a validation error that names the rule and the position") and "v1.1 additions",
"Policy validation": it "refuses `ALLOW` as a `scanning`, `unknown` or hash-bank outcome (a
version is never ALLOW while its evidence is incomplete)."

Proved by:
    tests/operators/test_policy.py::test_allow_is_refused_while_evidence_is_incomplete
    tests/operators/test_policy.py::test_every_other_outcome_is_accepted_where_allow_is_refused
    tests/operators/test_policy.py::test_while_scanning_never_allow_and_the_floor_depends_on_the_surface
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from modstream.contract.common import Modality, Outcome
from modstream.policy.expr import ExpressionError, compile_expression
from modstream.trust.hashbank import PHASH_MAX_DISTANCE

# Uploads that are files: parsed and checked (`media_check`) before anyone may see them.
MEDIA = frozenset({"image", "video", "audio"})
# Outcomes the Content Service serves to everyone (modstream/moderation/decide.py, VISIBILITY).
PUBLIC = frozenset({"ALLOW", "PROVISIONAL_ALLOW"})
Name = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:\-]+$")]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _not_allow(outcome: str) -> str:
    """Contract v1.1: a version is never ALLOW while its evidence is incomplete, so the
    scanning, unknown and hash-bank outcomes refuse it (PROVISIONAL_ALLOW is the way to publish
    before the evidence is in)."""
    if outcome == "ALLOW":
        raise ValueError(
            "ALLOW is refused here: a version is never ALLOW while its evidence is incomplete"
            " (use PROVISIONAL_ALLOW, RESTRICT, PENDING or BLOCK)"
        )
    return outcome


class OutcomeBySurface(_Section):
    """The floor while evidence is outstanding (`scanning`) or unknown (`unknown`)."""

    high_risk: Outcome = "PENDING"
    default: Outcome = "PENDING"

    @field_validator("high_risk", "default")
    @classmethod
    def _refuse_allow(cls, outcome: str) -> str:
        return _not_allow(outcome)


class DetectorRequirement(_Section):
    """`gate`: the required detectors that run first (cheap, deterministic checks such as
    `media_check`); the other required detectors (the models) are asked only for media that
    passed them (docs/scanning.md, "Cost order")."""

    required: list[Name] = Field(min_length=1)
    deadline_ms: Annotated[int, Field(gt=0)]
    gate: list[Name] = Field(default_factory=list)
    # This modality's floors instead of the document's `scanning` / `unknown` (media keep
    # theirs off `public` until their integrity gate passed: media_exposed_early).
    scanning: OutcomeBySurface | None = None
    unknown: OutcomeBySurface | None = None
    # Video only: frames scored are shot-aware, keyframes, scene changes and at least one
    # every `sample_ms` of a shot (0: keyframes and scene changes alone); absent: every frame
    # (modstream/detectors/video.py: Sampling; the recall it trades: docs/scanning.md, "Video").
    sample_ms: Annotated[int, Field(ge=0, le=600_000)] | None = None

    @model_validator(mode="after")
    def _gate_is_required(self) -> Self:
        extra = [name for name in self.gate if name not in self.required]
        if extra:
            raise ValueError(f"gate detectors must also be required: {', '.join(extra)}")
        return self


class Limit(_Section):
    max_bytes: Annotated[int, Field(gt=0)] | None = None
    mime_types: list[Annotated[str, Field(min_length=1)]] | None = None


class HashBankRule(_Section):
    outcome: Outcome
    reason: Name
    restriction: Name | None = None

    @field_validator("outcome")
    @classmethod
    def _refuse_allow(cls, outcome: str) -> str:
        return _not_allow(outcome)


class ReportsPolicy(_Section):
    review_threshold: Annotated[int, Field(ge=1)]
    reporter_hourly_limit: Annotated[int, Field(ge=1)] = 10
    queue: Name = "reports"
    priority: Annotated[int, Field(ge=0)] = 3


class Sanction(_Section):
    at: Annotated[int, Field(ge=1)]
    sanction: Literal["posting_suspended", "account_suspended"]
    duration_ms: Annotated[int, Field(gt=0)] | None = None


class Strikes(_Section):
    reasons: list[Name] = Field(min_length=1)
    window_days: Annotated[int, Field(ge=1, le=3650)]
    sanctions: list[Sanction] = Field(default_factory=list)

    @model_validator(mode="after")
    def _ascending(self) -> Self:
        thresholds = [sanction.at for sanction in self.sanctions]
        if thresholds != sorted(set(thresholds)):
            raise ValueError("sanctions must be in ascending, distinct `at` order")
        return self


class ReviewRequest(_Section):
    queue: Name
    priority: Annotated[int, Field(ge=0)] = 3


class SecondReview(_Section):
    """Who must agree before a human decision counts, and which share of human decisions is
    checked by a blind second review (issue 29 item 2; modstream/review/second_review.py).

    `outcomes` / `rules`: a review with one of these outcomes, or of a version one of these
    rules matches (the model's verdict), decides only once a second, distinct reviewer gives the
    same outcome in task queue `queue`; a different outcome opens a task in
    `escalation_queue`. `sample`: the share of the other human decisions (chosen from the
    review's event-id digest, so replay chooses the same) that decide at once and are then
    reviewed again blind, for the agreement figures."""

    outcomes: list[Outcome] = Field(default_factory=list)
    rules: list[Name] = Field(default_factory=list)
    sample: Annotated[float, Field(ge=0, le=1)] = 0.0
    queue: Name = "second_review"
    priority: Annotated[int, Field(ge=0)] = 1
    escalation_queue: Name = "escalation"
    escalation_priority: Annotated[int, Field(ge=0)] = 0


class Escalation(_Section):
    """A queue's escalation rule (modstream/review/escalation.py): a task of the queue still open
    `after_ms` after it opened gets priority `priority` and/or moves to queue `queue`."""

    after_ms: Annotated[int, Field(gt=0)]
    priority: Annotated[int, Field(ge=0)] | None = None
    queue: Name | None = None

    @model_validator(mode="after")
    def _changes_something(self) -> Self:
        if self.priority is None and self.queue is None:
            raise ValueError("an escalation needs a priority, a queue or both")
        return self


class Rule(_Section):
    id: Name
    when: Annotated[str, Field(min_length=1, max_length=4000)]
    outcome: Outcome
    reason: Name | None = None
    restriction: Name | None = None
    review: ReviewRequest | None = None

    @model_validator(mode="after")
    def _restriction_only_with_restrict(self) -> Self:
        if self.restriction is not None and self.outcome != "RESTRICT":
            raise ValueError("restriction is only allowed with outcome RESTRICT")
        if self.outcome == "RESTRICT" and self.restriction is None:
            raise ValueError("outcome RESTRICT needs a restriction (e.g. age_gate)")
        return self


class PolicyDocument(_Section):
    """The rule set a policy author writes (CONTRACT.md, "Policy document")."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    policy_id: Name
    version: Annotated[int, Field(ge=1)]
    description: str | None = None
    detectors: dict[Modality, DetectorRequirement]
    limits: dict[Modality, Limit] = Field(default_factory=dict)
    high_risk_surfaces: list[Name] = Field(default_factory=list)
    scanning: OutcomeBySurface = Field(default_factory=OutcomeBySurface)
    unknown: OutcomeBySurface = Field(default_factory=OutcomeBySurface)
    provisional_ttl_ms: Annotated[int, Field(gt=0)] | None = None
    hash_banks: dict[Name, HashBankRule] = Field(default_factory=dict)
    phash_max_distance: Annotated[int, Field(ge=0)] = 0
    reports: ReportsPolicy | None = None
    strikes: Strikes | None = None
    notices: dict[Name, Annotated[str, Field(min_length=1, max_length=1000)]] = Field(
        default_factory=dict
    )
    rules: list[Rule]
    default: Outcome
    second_review: SecondReview | None = None
    # task queue -> what happens to its tasks left open too long
    escalation: dict[Name, Escalation] = Field(default_factory=dict)

    @field_validator("phash_max_distance")
    @classmethod
    def _indexed_distance(cls, distance: int) -> int:
        """The hash-bank band index (modstream/trust/hashbank.py) finds every phash within 7 bits
        without scanning the bank; a larger distance would need a scan per input."""
        if distance > PHASH_MAX_DISTANCE:
            raise ValueError(
                f"phash_max_distance {distance} is above {PHASH_MAX_DISTANCE}, the largest "
                "distance the hash-bank index matches without scanning the whole bank"
            )
        return distance

    @model_validator(mode="after")
    def _second_review_rules_exist(self) -> Self:
        if self.second_review is not None:
            ids = {rule.id for rule in self.rules}
            unknown = [rule for rule in self.second_review.rules if rule not in ids]
            if unknown:
                raise ValueError(f"second_review.rules: no rule with id {', '.join(unknown)}")
        return self

    @model_validator(mode="after")
    def _sample_ms_is_for_video(self) -> Self:
        """Frame sampling means something for video alone: anywhere else it is a mistake."""
        wrong = [m for m, r in self.detectors.items() if m != "video" and r.sample_ms is not None]
        if wrong:
            raise ValueError(f"detectors.{wrong[0]}.sample_ms: only video is sampled")
        return self

    @model_validator(mode="after")
    def _no_text_gate(self) -> Self:
        """Text is not kept in the moderation state, so models gated on a text check could
        never be asked afterwards: the text request is the one that carries it."""
        text = self.detectors.get("text")
        if text is not None and text.gate:
            raise ValueError("detectors.text.gate: text detectors cannot be gated")
        return self


def media_exposed_early(document: PolicyDocument) -> list[str]:
    """Where the document would make media public before its integrity gate (`gate`, such as
    `media_check`: malware, parse) passed: a `scanning` or `unknown` floor of a media modality
    that is public (ALLOW, PROVISIONAL_ALLOW), or a hash-bank outcome that is (a bank match
    decides without waiting for any detector). Issue 27, point 9; docs/policy-language.md."""
    problems = []
    for modality, requirement in document.detectors.items():
        if modality not in MEDIA:
            continue
        checks = ", ".join(requirement.gate or requirement.required)
        for section in ("scanning", "unknown"):
            own = getattr(requirement, section)
            floor: OutcomeBySurface = own or getattr(document, section)
            for surfaces in ("high_risk", "default"):
                outcome = getattr(floor, surfaces)
                if outcome in PUBLIC:
                    where = f"detectors.{modality}.{section}" if own else section
                    problems.append(
                        f"{where}.{surfaces}: {outcome} would make {modality} public before"
                        f" its integrity gate ({checks}) passed; give detectors.{modality}."
                        f"{section} an outcome that is not public (PENDING, RESTRICT or BLOCK)"
                    )
    if any(modality in MEDIA for modality in document.detectors):
        problems += [
            f"hash_banks.{name}.outcome: {bank.outcome} would make media public before its"
            " integrity gate passed (a bank match decides before any detector)"
            for name, bank in document.hash_banks.items()
            if bank.outcome in PUBLIC
        ]
    return problems


class PolicyError(ValueError):
    """Every problem of a policy document, one line each, naming the rule or section."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def validate_document(raw: Any) -> PolicyDocument:
    """The validated document, or PolicyError listing every problem: rules that did validate
    may still have bad conditions, so those are reported along with the schema's findings."""
    if not isinstance(raw, Mapping):
        raise PolicyError(["<document>: a policy document must be a mapping"])
    try:
        document = PolicyDocument.model_validate(dict(raw))
    except ValidationError as error:
        found = [
            f"{_location(tuple(e['loc']), raw)}: {e['msg']}"
            for e in error.errors(include_url=False)
        ]
        found += _condition_problems(raw)
        raise PolicyError(found) from None
    exposed = media_exposed_early(document)
    if exposed:
        raise PolicyError(exposed)
    return document


def _location(loc: tuple[Any, ...], raw: Mapping[str, Any]) -> str:
    """`rule 'nsfw-block' (rules[0]).outcome` for errors inside a rule, else the dotted path."""
    if len(loc) >= 2 and loc[0] == "rules" and isinstance(loc[1], int):
        rules = raw.get("rules")
        rule_id = None
        if isinstance(rules, list) and loc[1] < len(rules) and isinstance(rules[loc[1]], dict):
            rule_id = rules[loc[1]].get("id")
        rest = ".".join(str(part) for part in loc[2:])
        head = f"rule {rule_id!r} (rules[{loc[1]}])" if rule_id else f"rules[{loc[1]}]"
        return f"{head}{'.' + rest if rest else ''}"
    return ".".join(str(part) for part in loc) or "<document>"


def warnings(document: PolicyDocument) -> list[str]:
    """Things that are valid but probably not meant: shown by `modstream policy validate`."""
    found = []
    reasons = {rule.reason for rule in document.rules if rule.reason}
    reasons |= {bank.reason for bank in document.hash_banks.values()}
    if document.strikes is not None:
        for reason in document.strikes.reasons:
            if reason not in reasons:
                found.append(f"strikes.reasons: no rule or hash bank gives reason {reason!r}")
    for reason in sorted(reasons - set(document.notices)):
        found.append(f"notices: no notice for reason {reason!r} (authors get a generic message)")
    for modality in document.detectors:
        if modality not in document.limits:
            found.append(f"limits: none for {modality}")
    return found


def _condition_problems(raw: Mapping[str, Any]) -> list[str]:
    rules = raw.get("rules")
    if not isinstance(rules, list):
        return []
    banks = raw.get("hash_banks")
    known = banks.keys() if isinstance(banks, Mapping) else ()
    problems = []
    for index, rule in enumerate(rules):
        if isinstance(rule, Mapping) and isinstance(rule.get("when"), str):
            try:
                compile_expression(rule["when"], known_banks=known)
            except ExpressionError as error:
                problems.append(f"{_location(('rules', index), raw)}.when: {error}")
    return problems
