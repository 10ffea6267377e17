"""Policy evaluation, per decision, over a policy compiled once per version.

`load_policy` turns a document (YAML or JSON, already parsed) into a `CompiledPolicy` or raises
`PolicyError` listing every problem, each naming its rule and position (the document and its
validation: modstream/policy/document.py; conditions compiled and rules indexed:
modstream/policy/compiler.py). `CompiledPolicy.evaluate` is total: whatever the evidence (NaN,
missing labels, unknown detectors) it returns a `Verdict`.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from typing import Any, Final

from modstream.contract.common import OUTCOME_SEVERITY, UNDETERMINED
from modstream.core.values import Value
from modstream.policy.compiler import CompiledRule, compile_rules, index_rules
from modstream.policy.document import (
    DetectorRequirement,
    HashBankRule,
    Limit,
    OutcomeBySurface,
    PolicyDocument,
    PolicyError,
    ReportsPolicy,
    ReviewRequest,
    Rule,
    Sanction,
    Strikes,
    validate_document,
    warnings,
)
from modstream.policy.expr import EvalContext, Evaluator

SEVERITY_RANK: dict[str, int] = {
    outcome: len(OUTCOME_SEVERITY) - i for i, outcome in enumerate(OUTCOME_SEVERITY)
}


def most_severe(outcomes: Iterable[str]) -> str | None:
    """The most severe outcome (BLOCK > PENDING > RESTRICT > PROVISIONAL_ALLOW > ALLOW), the
    first of equals; None for none. A loop, not `max(key=SEVERITY_RANK.__getitem__)`: the key
    is a Python call per outcome (about 4,700 instructions an evaluation, issue 26)."""
    best: str | None = None
    best_rank = -1
    for outcome in outcomes:
        rank = SEVERITY_RANK[outcome]
        if rank > best_rank:
            best, best_rank = outcome, rank
    return best


class ReviewAsk(Value):
    """A review the policy asks for: the queue, its priority and the rule that asked."""

    FIELDS = ("queue", "priority", "rule_id")

    def __init__(self, queue: str, priority: int, rule_id: str) -> None:
        self.queue: Final = queue
        self.priority: Final = priority
        self.rule_id: Final = rule_id


# What a rule's match adds to an evaluation: its condition, id, outcome, reason, restriction and
# review ask (CompiledPolicy._matches).
RuleMatch = tuple[Evaluator, str, str, str | None, str | None, ReviewAsk | None]


class EvidenceView(Value):
    """What the evaluator knows of a content version's evidence.

    `scores`: (detector, label) -> the highest score over segments; `unknown`: detectors with
    missing, timed-out or errored evidence; `outstanding`: evidence still expected before the
    deadline (the version is still scanning).
    """

    # `checked` is set by `from_segments`, whose scores are already checked: `evaluate` does not
    # check them again. Not part of what the view says (equality and repr leave it out).
    FIELDS = ("scores", "unknown", "outstanding")

    def __init__(
        self,
        scores: Mapping[tuple[str, str], float] | None = None,
        unknown: frozenset[str] = frozenset(),
        outstanding: bool = False,
        checked: bool = False,
    ) -> None:
        self.scores: Final[Mapping[tuple[str, str], float]] = {} if scores is None else scores
        self.unknown: Final = unknown
        self.outstanding: Final = outstanding
        self.checked: Final = checked

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
                    if not is_score(value):
                        broken.add(detector)
                        continue
                    key = (detector, label)
                    if value > best.get(key, -1.0):
                        best[key] = float(value)
        return cls(scores=best, unknown=frozenset(broken), outstanding=outstanding, checked=True)


class ContentFacts(Value):
    """The content version's own fields that policy may read."""

    FIELDS = (
        "modality",
        "surface",
        "region",
        "audience",
        "account_risk",
        "size_bytes",
        "mime_type",
        "report_count",
        "language",
    )

    def __init__(
        self,
        modality: str,
        surface: str,
        region: str = "",
        audience: str = "all",
        account_risk: float = 0.0,
        size_bytes: int = 0,
        mime_type: str = "",
        report_count: float = 0,
        language: str = UNDETERMINED,
    ) -> None:
        self.modality: Final = modality
        self.surface: Final = surface
        self.region: Final = region
        self.audience: Final = audience
        self.account_risk: Final = account_risk
        self.size_bytes: Final = size_bytes
        self.mime_type: Final = mime_type
        # Distinct reporters, weighted (modstream/moderation/rules/reports.py).
        self.report_count: Final = report_count
        # The language its text results named (modstream/moderation/language.py); `und` until
        # one names one.
        self.language: Final = language


class Verdict(Value):
    """What the policy decides, and why (rule ids, reasons), for one content version."""

    FIELDS = (
        "outcome",
        "restriction",
        "reasons",
        "matched_rules",
        "review",
        "expires_ts",
        "limit_failed",
    )

    def __init__(
        self,
        outcome: str,
        restriction: str | None,
        reasons: tuple[str, ...],
        matched_rules: tuple[str, ...],
        review: tuple[ReviewAsk, ...],
        expires_ts: int | None,
        limit_failed: bool = False,
    ) -> None:
        self.outcome: Final = outcome
        self.restriction: Final = restriction
        self.reasons: Final = reasons
        self.matched_rules: Final = matched_rules
        self.review: Final = review
        self.expires_ts: Final = expires_ts
        self.limit_failed: Final = limit_failed


def _clean_scores(
    scores: Mapping[tuple[str, str], Any],
) -> tuple[dict[tuple[str, str], float], set[str]]:
    """Scores that are numbers in [0, 1]; a detector with any other value counts as unknown."""
    clean: dict[tuple[str, str], float] = {}
    broken: set[str] = set()
    for key, value in scores.items():
        if is_score(value):
            clean[key] = float(value)
        elif isinstance(key, tuple) and key:
            broken.add(str(key[0]))
    return clean, broken


def is_score(value: Any) -> bool:
    """A number in [0, 1] (not a bool, not NaN)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0.0 <= value <= 1.0
    )


class _Tally:
    """What one evaluation has found so far: outcomes (the most severe wins), reasons, matched
    rule ids, review asks and the first restriction."""

    __slots__ = ("matched", "outcomes", "reasons", "restriction", "review")

    def __init__(self) -> None:
        self.outcomes: list[str] = []
        self.reasons: list[str] = []
        self.matched: list[str] = []
        self.review: list[ReviewAsk] = []
        self.restriction: str | None = None


def _limits(document: PolicyDocument) -> dict[str, tuple[int | None, frozenset[str] | None]]:
    """Per modality: (max_bytes, mime_types), None where the policy sets no limit."""
    return {
        modality: (
            limit.max_bytes,
            None if limit.mime_types is None else frozenset(limit.mime_types),
        )
        for modality, limit in document.limits.items()
    }


def _rule_matches(rules: list[CompiledRule]) -> list[RuleMatch]:
    """Per rule, in rule order, what a match adds: read on every evaluation, so held as a
    tuple rather than read from the rule's document model (an attribute of a pydantic model
    costs a Python-level lookup each; issue 26)."""
    return [
        (
            compiled.condition.evaluate,
            compiled.rule.id,
            compiled.rule.outcome,
            compiled.rule.reason,
            compiled.rule.restriction,
            None
            if compiled.rule.review is None
            else ReviewAsk(
                compiled.rule.review.queue, compiled.rule.review.priority, compiled.rule.id
            ),
        )
        for compiled in rules
    ]


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
        # Per modality: its own `scanning` and `unknown` floors, else the document's.
        self._floors: dict[str, tuple[OutcomeBySurface, OutcomeBySurface]] = {
            modality: (req.scanning or document.scanning, req.unknown or document.unknown)
            for modality, req in document.detectors.items()
        }
        self._default_floors = (document.scanning, document.unknown)
        # Read on every evaluation: the document's fields held as plain attributes, not read
        # through its pydantic model each time (issue 26).
        self.hash_banks = document.hash_banks
        self.notices: dict[str, str] = dict(document.notices)
        self.default_outcome: str = document.default
        self.provisional_ttl_ms: int | None = document.provisional_ttl_ms
        reports = document.reports
        self._report_review: tuple[float, ReviewAsk] | None = (
            None
            if reports is None
            else (reports.review_threshold, ReviewAsk(reports.queue, reports.priority, "reports"))
        )
        # What a decision's sanctions entry carries (modstream/moderation/records.py): the reasons
        # that are strikes and the strike rules as JSON, made once (a pydantic dump each time
        # cost about 8,000 instructions a decision). Read only: shared by every entry.
        strikes = document.strikes
        self.strike_reasons: frozenset[str] = (
            frozenset(strikes.reasons) if strikes is not None else frozenset()
        )
        self.strikes_json: dict[str, Any] | None = (
            strikes.model_dump(mode="json") if strikes is not None else None
        )
        self._limits = _limits(document)
        self._matches = _rule_matches(rules)
        self._always, self._by_modality, self._by_bank, self._by_score = index_rules(rules)
        self.rules_by_id = {compiled.rule.id: compiled for compiled in rules}
        # The rule reasons a reviewer's `reason` may name (modstream/moderation/verdict.py).
        self.rule_reasons = frozenset(rule.reason for rule in document.rules)

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

    def floors(self, modality: str) -> tuple[OutcomeBySurface, OutcomeBySurface]:
        """The (`scanning`, `unknown`) floors of `modality`."""
        return self._floors.get(modality, self._default_floors)

    def is_high_risk(self, surface: str) -> bool:
        return surface in self._high_risk

    def limit_failures(self, facts: ContentFacts) -> tuple[str, ...]:
        """Reason codes for the deterministic checks this content fails (empty when it passes)."""
        limit = self._limits.get(facts.modality)
        if limit is None:
            return ()
        max_bytes, mime_types = limit
        failures = []
        if max_bytes is not None and facts.size_bytes > max_bytes:
            failures.append("limit_size")
        if mime_types is not None and facts.mime_type not in mime_types:
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
        """Decide one content version. Never raises on any evidence. In order: a reviewer's
        outcome, failed limits, then hash banks, rules and the evidence floor together."""
        if human_outcome is not None:
            # A reviewer's outcome overrides rules and is sticky (CONTRACT.md, Outcomes).
            outcome, reason = human_outcome
            return self._finish(outcome, None, (reason or "human_review",), (), (), ts, paused)
        failures = self.limit_failures(facts)
        if failures:
            return self._finish("PENDING", None, failures, (), (), ts, paused, limit_failed=True)
        context = self._context(facts, evidence, hash_matches)
        tally = _Tally()
        if context.hash_matches:
            self._tally_banks(context.hash_matches, tally)
        self._tally_rules(context, tally)
        self._tally_floor(facts, evidence.outstanding, context, tally)
        report_review = self._report_review
        if report_review is not None and facts.report_count >= report_review[0]:
            tally.review.append(report_review[1])
        outcome = most_severe(tally.outcomes) or "PENDING"
        restriction = tally.restriction if outcome == "RESTRICT" else None
        return self._finish(
            outcome,
            restriction,
            tuple(tally.reasons),
            tuple(tally.matched),
            tuple(tally.review),
            ts,
            paused,
        )

    def _context(
        self, facts: ContentFacts, evidence: EvidenceView, hash_matches: Iterable[str]
    ) -> EvalContext:
        """What conditions read: checked scores (a detector with a bad score is unknown) and
        only the hash-bank matches this policy knows."""
        broken: set[str]
        if evidence.checked:
            scores, broken = dict(evidence.scores), set()
        else:
            scores, broken = _clean_scores(evidence.scores)
        known_banks = self.hash_banks
        return EvalContext(
            modality=facts.modality,
            surface=facts.surface,
            region=facts.region,
            audience=facts.audience,
            mime_type=facts.mime_type,
            account_risk=_finite(facts.account_risk),
            size_bytes=facts.size_bytes,
            report_count=facts.report_count,
            language=facts.language,
            scores=scores,
            unknown=frozenset(evidence.unknown) | broken,
            hash_matches=frozenset(bank for bank in hash_matches if bank in known_banks),
        )

    def _tally_banks(self, banks: Iterable[str], tally: _Tally) -> None:
        """Each matched bank's outcome and reason, in bank-name order."""
        for bank in sorted(banks):
            bank_rule = self.hash_banks[bank]
            tally.outcomes.append(bank_rule.outcome)
            tally.reasons.append(bank_rule.reason)
            tally.matched.append(f"hash_bank:{bank}")
            tally.restriction = tally.restriction or bank_rule.restriction

    def _tally_rules(self, context: EvalContext, tally: _Tally) -> None:
        """The candidate rules that match, in rule order; a rule whose condition throws makes
        the version PENDING (`rule_error`) instead of being skipped silently."""
        outcomes, reasons, matched = tally.outcomes, tally.reasons, tally.matched
        errored = False
        rule_matches = self._matches
        for index in self.candidates(context):
            condition, rule_id, outcome, reason, restriction, review = rule_matches[index]
            try:
                hit = bool(condition(context))
            except Exception:
                errored = True
                continue
            if not hit:
                continue
            matched.append(rule_id)
            outcomes.append(outcome)
            if reason and reason not in reasons:
                reasons.append(reason)
            if restriction and tally.restriction is None:
                tally.restriction = restriction
            if review is not None:
                tally.review.append(review)
        if errored:
            outcomes.append("PENDING")
            reasons.append("rule_error")

    def _tally_floor(
        self, facts: ContentFacts, outstanding: bool, context: EvalContext, tally: _Tally
    ) -> None:
        """The floor while evidence is outstanding or unknown (a hash-bank match decides
        without waiting for detectors); the policy's default when nothing else spoke."""
        scanning, unknown = self.floors(facts.modality)
        floor: OutcomeBySurface | None = None
        if context.hash_matches:
            pass
        elif outstanding:
            floor, reason = scanning, "scanning"
        elif context.unknown:
            floor, reason = unknown, "evidence_unknown"
        if floor is not None:
            high_risk = facts.surface in self._high_risk
            tally.outcomes.append(floor.high_risk if high_risk else floor.default)
            if not tally.matched:
                tally.reasons.append(reason)
        if not tally.outcomes:
            tally.outcomes.append(self.default_outcome)

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
        banks = sorted(bank for bank in hash_matches if bank in self.hash_banks)
        if banks:
            rules = [self.hash_banks[bank] for bank in banks]
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
        scanning = self.floors(facts.modality)[0]
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
        ttl = self.provisional_ttl_ms
        expires = ts + ttl if outcome == "PROVISIONAL_ALLOW" and ttl is not None else None
        return Verdict(outcome, restriction, reasons, matched, review, expires, limit_failed)


def _finite(value: float) -> float:
    return value if isinstance(value, int | float) and math.isfinite(value) else 0.0


def load_policy(raw: Any) -> CompiledPolicy:
    """Validate a parsed policy document and compile it; PolicyError lists every problem."""
    document = validate_document(raw)
    return CompiledPolicy(document, compile_rules(document))


__all__ = [
    "SEVERITY_RANK",
    "CompiledPolicy",
    "CompiledRule",
    "ContentFacts",
    "DetectorRequirement",
    "EvidenceView",
    "HashBankRule",
    "Limit",
    "OutcomeBySurface",
    "PolicyDocument",
    "PolicyError",
    "ReportsPolicy",
    "ReviewAsk",
    "ReviewRequest",
    "Rule",
    "Sanction",
    "Strikes",
    "Verdict",
    "load_policy",
    "most_severe",
    "warnings",
]
