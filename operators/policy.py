"""Policy documents: validation, compilation (once per version) and evaluation.

`load_policy` turns a document (YAML or JSON, already parsed) into a `CompiledPolicy` or raises
`PolicyError` listing every problem, each naming its rule and position. `CompiledPolicy.evaluate`
is total: whatever the evidence (NaN, missing labels, unknown detectors) it returns a `Verdict`.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from operators.hashbank import PHASH_MAX_DISTANCE
from operators.policy_expr import (
    CompiledExpression,
    EvalContext,
    ExpressionError,
    compile_expression,
)
from schemas.common import OUTCOME_SEVERITY, Modality, Outcome

SEVERITY_RANK: dict[str, int] = {
    outcome: len(OUTCOME_SEVERITY) - i for i, outcome in enumerate(OUTCOME_SEVERITY)
}
Name = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:\-]+$")]


def most_severe(outcomes: Iterable[str]) -> str | None:
    """The most severe outcome (BLOCK > PENDING > RESTRICT > PROVISIONAL_ALLOW > ALLOW)."""
    return max(outcomes, key=SEVERITY_RANK.__getitem__, default=None)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class DetectorRequirement(_Section):
    """`gate`: the required detectors that run first (cheap, deterministic checks such as
    `media_check`); the other required detectors (the models) are asked only for media that
    passed them (docs/scanning.md, "Cost order")."""

    required: list[Name] = Field(min_length=1)
    deadline_ms: Annotated[int, Field(gt=0)]
    gate: list[Name] = Field(default_factory=list)

    @model_validator(mode="after")
    def _gate_is_required(self) -> Self:
        extra = [name for name in self.gate if name not in self.required]
        if extra:
            raise ValueError(f"gate detectors must also be required: {', '.join(extra)}")
        return self


class Limit(_Section):
    max_bytes: Annotated[int, Field(gt=0)] | None = None
    mime_types: list[Annotated[str, Field(min_length=1)]] | None = None


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

    @field_validator("phash_max_distance")
    @classmethod
    def _indexed_distance(cls, distance: int) -> int:
        """The hash-bank band index (operators/hashbank.py) finds every phash within 7 bits
        without scanning the bank; a larger distance would need a scan per input."""
        if distance > PHASH_MAX_DISTANCE:
            raise ValueError(
                f"phash_max_distance {distance} is above {PHASH_MAX_DISTANCE}, the largest "
                "distance the hash-bank index matches without scanning the whole bank"
            )
        return distance

    @model_validator(mode="after")
    def _no_text_gate(self) -> Self:
        """Text is not kept in the moderation state, so models gated on a text check could
        never be asked afterwards: the text request is the one that carries it."""
        text = self.detectors.get("text")
        if text is not None and text.gate:
            raise ValueError("detectors.text.gate: text detectors cannot be gated")
        return self


class PolicyError(ValueError):
    """Every problem of a policy document, one line each, naming the rule or section."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class ReviewAsk:
    queue: str
    priority: int
    rule_id: str


@dataclass(frozen=True)
class EvidenceView:
    """What the evaluator knows of a content version's evidence.

    `scores`: (detector, label) -> the highest score over segments; `unknown`: detectors with
    missing, timed-out or errored evidence; `outstanding`: evidence still expected before the
    deadline (the version is still scanning).
    """

    scores: Mapping[tuple[str, str], float] = field(default_factory=dict)
    unknown: frozenset[str] = frozenset()
    outstanding: bool = False
    # Set by `from_segments`, whose scores are already checked: `evaluate` does not check them
    # again. Not part of what the view says (equality and repr leave it out).
    checked: bool = field(default=False, compare=False, repr=False)

    @classmethod
    def from_segments(
        cls,
        segments: Mapping[str, Mapping[Any, Mapping[str, Any]]],
        unknown: Iterable[str] = (),
        outstanding: bool = False,
    ) -> EvidenceView:
        """Build the view from per-detector, per-segment label scores: `score()` reads the
        highest of each label over segments; a value that is not a number in [0, 1] makes its
        detector unknown instead (NaN is never a score)."""
        best: dict[tuple[str, str], float] = {}
        broken: set[str] = set(unknown)
        for detector, by_segment in segments.items():
            for labels in by_segment.values():
                for label, value in labels.items():
                    if not _is_score(value):
                        broken.add(detector)
                        continue
                    key = (detector, label)
                    if value > best.get(key, -1.0):
                        best[key] = float(value)
        return cls(scores=best, unknown=frozenset(broken), outstanding=outstanding, checked=True)


@dataclass(frozen=True)
class ContentFacts:
    """The content version's own fields that policy may read."""

    modality: str
    surface: str
    region: str = ""
    audience: str = "all"
    account_risk: float = 0.0
    size_bytes: int = 0
    mime_type: str = ""
    report_count: float = 0  # distinct reporters, weighted (operators/reports.py)


@dataclass(frozen=True)
class Verdict:
    """What the policy decides, and why (rule ids, reasons), for one content version."""

    outcome: str
    restriction: str | None
    reasons: tuple[str, ...]
    matched_rules: tuple[str, ...]
    review: tuple[ReviewAsk, ...]
    expires_ts: int | None
    limit_failed: bool = False


@dataclass(frozen=True)
class CompiledRule:
    index: int
    rule: Rule
    condition: CompiledExpression


def _clean_scores(
    scores: Mapping[tuple[str, str], Any],
) -> tuple[dict[tuple[str, str], float], set[str]]:
    """Scores that are numbers in [0, 1]; a detector with any other value counts as unknown."""
    clean: dict[tuple[str, str], float] = {}
    broken: set[str] = set()
    for key, value in scores.items():
        if _is_score(value):
            clean[key] = float(value)
        elif isinstance(key, tuple) and key:
            broken.add(str(key[0]))
    return clean, broken


def _is_score(value: Any) -> bool:
    """A number in [0, 1] (not a bool, not NaN)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0.0 <= value <= 1.0
    )


class CompiledPolicy:
    """One policy version, compiled once: rules indexed by the cheap conditions they need."""

    def __init__(self, document: PolicyDocument, rules: list[CompiledRule]) -> None:
        self.document = document
        self.rules = rules
        self.policy_id = document.policy_id
        self.version = document.version
        self._high_risk = frozenset(document.high_risk_surfaces)
        # Per modality, read on every decision: (required, gate, deadline_ms).
        self._requirements: dict[str, tuple[tuple[str, ...], tuple[str, ...], int]] = {
            modality: (tuple(req.required), tuple(req.gate), req.deadline_ms)
            for modality, req in document.detectors.items()
        }
        self._always: list[int] = []
        self._by_modality: dict[str, list[int]] = {}
        self._by_bank: dict[str, list[int]] = {}
        thresholds: dict[tuple[str, str], list[tuple[float, int]]] = {}
        for compiled in rules:
            guards = compiled.condition.guards
            if guards is None:
                self._always.append(compiled.index)
                continue
            for guard in guards:
                if guard[0] == "score":
                    thresholds.setdefault(guard[1], []).append((guard[2], compiled.index))
                elif guard[0] == "modality":
                    self._by_modality.setdefault(guard[1], []).append(compiled.index)
                else:
                    self._by_bank.setdefault(guard[1], []).append(compiled.index)
        self._by_score = {
            key: ([t for t, _ in sorted(entries)], [i for _, i in sorted(entries)])
            for key, entries in thresholds.items()
        }

    def required_detectors(self, modality: str) -> tuple[str, ...]:
        requirement = self._requirements.get(modality)
        return requirement[0] if requirement else ()

    def gate_detectors(self, modality: str) -> tuple[str, ...]:
        """The required detectors that gate the others for `modality` (may be empty)."""
        requirement = self._requirements.get(modality)
        return requirement[1] if requirement else ()

    def deadline_ms(self, modality: str) -> int | None:
        requirement = self._requirements.get(modality)
        return requirement[2] if requirement else None

    def is_high_risk(self, surface: str) -> bool:
        return surface in self._high_risk

    def limit_failures(self, facts: ContentFacts) -> tuple[str, ...]:
        """Reason codes for the deterministic checks this content fails (empty when it passes)."""
        limit = self.document.limits.get(facts.modality)  # type: ignore[call-overload]
        if limit is None:
            return ()
        failures = []
        if limit.max_bytes is not None and facts.size_bytes > limit.max_bytes:
            failures.append("limit_size")
        if limit.mime_types is not None and facts.mime_type not in limit.mime_types:
            failures.append("limit_mime_type")
        return tuple(failures)

    def candidates(self, context: EvalContext) -> list[int]:
        """Indices of the rules whose cheap necessary condition holds, in rule order."""
        chosen = set(self._always)
        for key, (thresholds, indices) in self._by_score.items():
            score = context.scores.get(key)
            if score:
                chosen.update(indices[: bisect_right(thresholds, score)])
        modality_rules = self._by_modality.get(context.modality)
        if modality_rules:
            chosen.update(modality_rules)
        for bank in context.hash_matches:
            bank_rules = self._by_bank.get(bank)
            if bank_rules:
                chosen.update(bank_rules)
        return sorted(chosen)

    def evaluate(
        self,
        facts: ContentFacts,
        evidence: EvidenceView,
        *,
        ts: int,
        hash_matches: Iterable[str] = (),
        human_outcome: tuple[str, str | None] | None = None,
        paused: bool = False,
    ) -> Verdict:
        """Decide one content version. Never raises on any evidence."""
        document = self.document
        if human_outcome is not None:
            # A reviewer's outcome overrides rules and is sticky (CONTRACT.md, Outcomes).
            outcome, reason = human_outcome
            return self._finish(outcome, None, (reason or "human_review",), (), (), ts, paused)

        failures = self.limit_failures(facts)
        if failures:
            return self._finish("PENDING", None, failures, (), (), ts, paused, limit_failed=True)

        broken: set[str]
        if evidence.checked:
            scores, broken = dict(evidence.scores), set()
        else:
            scores, broken = _clean_scores(evidence.scores)
        unknown = frozenset(evidence.unknown) | broken
        banks = frozenset(bank for bank in hash_matches if bank in document.hash_banks)
        context = EvalContext(
            modality=facts.modality,
            surface=facts.surface,
            region=facts.region,
            audience=facts.audience,
            mime_type=facts.mime_type,
            account_risk=_finite(facts.account_risk),
            size_bytes=facts.size_bytes,
            report_count=facts.report_count,
            scores=scores,
            unknown=unknown,
            hash_matches=banks,
        )
        outcomes: list[str] = []
        reasons: list[str] = []
        matched: list[str] = []
        review: list[ReviewAsk] = []
        restriction: str | None = None
        for bank in sorted(banks):
            bank_rule = document.hash_banks[bank]
            outcomes.append(bank_rule.outcome)
            reasons.append(bank_rule.reason)
            matched.append(f"hash_bank:{bank}")
            restriction = restriction or bank_rule.restriction
        errored = False
        for index in self.candidates(context):
            compiled = self.rules[index]
            try:
                hit = bool(compiled.condition.evaluate(context))
            except Exception:
                errored = True
                continue
            if not hit:
                continue
            rule = compiled.rule
            matched.append(rule.id)
            outcomes.append(rule.outcome)
            if rule.reason and rule.reason not in reasons:
                reasons.append(rule.reason)
            if rule.restriction and restriction is None:
                restriction = rule.restriction
            if rule.review is not None:
                review.append(ReviewAsk(rule.review.queue, rule.review.priority, rule.id))
        if errored:
            outcomes.append("PENDING")
            reasons.append("rule_error")

        high_risk = self.is_high_risk(facts.surface)
        if banks:
            pass  # a hash-bank match decides without waiting for detectors
        elif evidence.outstanding:
            floor = document.scanning.high_risk if high_risk else document.scanning.default
            outcomes.append(floor)
            if not matched:
                reasons.append("scanning")
        elif unknown:
            floor = document.unknown.high_risk if high_risk else document.unknown.default
            outcomes.append(floor)
            if not matched:
                reasons.append("evidence_unknown")
        if not outcomes:
            outcomes.append(document.default)
        reports = document.reports
        if reports is not None and facts.report_count >= reports.review_threshold:
            review.append(ReviewAsk(reports.queue, reports.priority, "reports"))
        outcome = most_severe(outcomes) or "PENDING"
        if outcome != "RESTRICT":
            restriction = None
        return self._finish(
            outcome, restriction, tuple(reasons), tuple(matched), tuple(review), ts, paused
        )

    def fast_gate(
        self,
        facts: ContentFacts,
        *,
        ts: int,
        hash_matches: Iterable[str] = (),
        human_outcome: tuple[str, str | None] | None = None,
        paused: bool = False,
    ) -> Verdict:
        """The first decision of every upsert, before any model (CONTRACT.md): the bank's
        outcome on a hash-bank match, PENDING when a limit fails, else the scanning outcome."""
        if human_outcome is not None:
            outcome, reason = human_outcome
            return self._finish(outcome, None, (reason or "human_review",), (), (), ts, paused)
        banks = sorted(bank for bank in hash_matches if bank in self.document.hash_banks)
        if banks:
            rules = [self.document.hash_banks[bank] for bank in banks]
            outcome = most_severe(rule.outcome for rule in rules) or "BLOCK"
            restriction = next(
                (r.restriction for r in rules if r.outcome == outcome and r.restriction), None
            )
            reasons = tuple(dict.fromkeys(rule.reason for rule in rules))
            return self._finish(
                outcome,
                restriction if outcome == "RESTRICT" else None,
                reasons,
                tuple(f"hash_bank:{bank}" for bank in banks),
                (),
                ts,
                paused,
            )
        failures = self.limit_failures(facts)
        if failures:
            return self._finish("PENDING", None, failures, (), (), ts, paused, limit_failed=True)
        scanning = self.document.scanning
        floor = scanning.high_risk if self.is_high_risk(facts.surface) else scanning.default
        return self._finish(floor, None, ("scanning",), (), (), ts, paused)

    def _finish(
        self,
        outcome: str,
        restriction: str | None,
        reasons: tuple[str, ...],
        matched: tuple[str, ...],
        review: tuple[ReviewAsk, ...],
        ts: int,
        paused: bool,
        limit_failed: bool = False,
    ) -> Verdict:
        if paused and SEVERITY_RANK[outcome] < SEVERITY_RANK["PENDING"]:
            outcome, restriction = "PENDING", None
            reasons = (*reasons, "publication_paused")
        ttl = self.document.provisional_ttl_ms
        expires = ts + ttl if outcome == "PROVISIONAL_ALLOW" and ttl is not None else None
        return Verdict(outcome, restriction, reasons, matched, review, expires, limit_failed)


def _finite(value: float) -> float:
    return value if isinstance(value, int | float) and math.isfinite(value) else 0.0


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


def load_policy(raw: Any) -> CompiledPolicy:
    """Validate a parsed policy document and compile it; PolicyError lists every problem."""
    if not isinstance(raw, Mapping):
        raise PolicyError(["<document>: a policy document must be a mapping"])
    try:
        document = PolicyDocument.model_validate(dict(raw))
    except ValidationError as error:
        found = [
            f"{_location(tuple(e['loc']), raw)}: {e['msg']}"
            for e in error.errors(include_url=False)
        ]
        # Rules that did validate may still have bad conditions: report those too.
        found += _condition_problems(raw)
        raise PolicyError(found) from None

    problems: list[str] = []
    seen: set[str] = set()
    compiled: list[CompiledRule] = []
    for index, rule in enumerate(document.rules):
        where = f"rule {rule.id!r} (rules[{index}])"
        if rule.id in seen:
            problems.append(f"{where}: duplicate rule id")
        seen.add(rule.id)
        try:
            condition = compile_expression(rule.when, known_banks=document.hash_banks.keys())
        except ExpressionError as error:
            problems.append(f"{where}.when: {error}")
            continue
        compiled.append(CompiledRule(index, rule, condition))
    if problems:
        raise PolicyError(problems)
    return CompiledPolicy(document, compiled)


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
