"""What a candidate policy version would change: its decisions beside the active ones.

The promotion gate (`modstream policy promote`, live: moderation.shadow against
moderation.decisions) and the backtest (`modstream policy backtest`, two replays of one file)
ask the same question, so they share this answer: per content version, the latest decision of
each side; how many outcomes change, by outcome transition, matched rule, surface, region and
modality; which versions the candidate would newly BLOCK; and the versions only one side
decided, counted and shown rather than dropped. Pure: records in, a `Comparison` out; reading
Kafka or replay output is the caller's (modstream/ops/promotion.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

VersionKey = tuple[str, int]  # (content_id, content_version)
SAMPLES = 5  # how many new BLOCKs and one-sided versions a rendering names


@dataclass(frozen=True)
class Decided:
    """The part of a decision record the comparison reads."""

    content_id: str
    content_version: int
    decision_revision: int
    outcome: str
    restriction: str | None
    matched_rules: tuple[str, ...]
    policy_version: int
    ts: int

    @property
    def label(self) -> str:
        """The outcome as the Content Service applies it: `RESTRICT:age_gate`, `BLOCK`."""
        return f"{self.outcome}:{self.restriction}" if self.restriction else self.outcome

    @property
    def ref(self) -> str:
        return f"{self.content_id}@{self.content_version}"


def decided(record: Mapping[str, Any]) -> Decided:
    """A moderation.decisions / moderation.shadow record (already schema-checked) as Decided."""
    return Decided(
        content_id=str(record["content_id"]),
        content_version=int(record["content_version"]),
        decision_revision=int(record["decision_revision"]),
        outcome=str(record["outcome"]),
        restriction=record.get("restriction") or None,
        matched_rules=tuple(str(rule) for rule in record.get("matched_rules") or ()),
        policy_version=int(record["policy_version"]),
        ts=int(record["ts"]),
    )


class Latest:
    """The latest decision per content version of one side, fed one record at a time (a
    topic is read once, never held): the highest `decision_revision`, then the latest `ts`.
    Records outside [since, until] (event time, ms) are left out."""

    def __init__(self, since: int | None = None, until: int | None = None) -> None:
        self.since, self.until = since, until
        self.by_version: dict[VersionKey, Decided] = {}

    def add(self, record: Mapping[str, Any]) -> None:
        one = decided(record)
        if self.since is not None and one.ts < self.since:
            return
        if self.until is not None and one.ts > self.until:
            return
        key = (one.content_id, one.content_version)
        held = self.by_version.get(key)
        if held is None or (one.decision_revision, one.ts) >= (held.decision_revision, held.ts):
            self.by_version[key] = one

    def extend(self, records: Iterable[Mapping[str, Any]]) -> Latest:
        for record in records:
            self.add(record)
        return self


@dataclass(frozen=True)
class Change:
    """One content version whose outcome the candidate changes."""

    active: Decided
    candidate: Decided
    facts: Mapping[str, str]

    @property
    def transition(self) -> str:
        return f"{self.active.label}->{self.candidate.label}"


@dataclass
class Slice:
    """Versions compared and changed within one surface, region or modality."""

    compared: int = 0
    changed: int = 0


@dataclass
class Comparison:
    """The candidate's decisions beside the active ones over the same content versions."""

    compared: int = 0
    changes: list[Change] = field(default_factory=list)
    transitions: Counter[str] = field(default_factory=Counter)
    rules_gained: Counter[str] = field(default_factory=Counter)  # matched by the candidate only
    rules_lost: Counter[str] = field(default_factory=Counter)  # matched by the active only
    slices: dict[str, dict[str, Slice]] = field(default_factory=dict)  # dimension -> value -> …
    active_only: list[VersionKey] = field(default_factory=list)
    candidate_only: list[VersionKey] = field(default_factory=list)

    @property
    def changed(self) -> int:
        return len(self.changes)

    @property
    def fraction(self) -> Fraction:
        """Changed outcomes over versions compared (0 when nothing was compared)."""
        return Fraction(self.changed, self.compared) if self.compared else Fraction(0)

    @property
    def new_blocks(self) -> list[Change]:
        """Versions the candidate would BLOCK that the active policy does not."""
        return [c for c in self.changes if c.candidate.outcome == "BLOCK"]

    def within(self, max_changed: Fraction) -> bool:
        """True when something was compared and the changed fraction is at most the limit."""
        return self.compared > 0 and self.fraction <= max_changed


DIMENSIONS = ("surface", "region", "modality")
UNKNOWN_FACT = "unknown"


def compare(
    active: Mapping[VersionKey, Decided],
    candidate: Mapping[VersionKey, Decided],
    facts: Mapping[VersionKey, Mapping[str, Any]] | None = None,
) -> Comparison:
    """Per content version decided by both sides, whether the candidate's latest outcome (with
    its restriction) differs from the active one's; `facts` gives each version's surface,
    region and modality (`unknown` when missing)."""
    facts = facts or {}
    result = Comparison(
        active_only=sorted(set(active) - set(candidate)),
        candidate_only=sorted(set(candidate) - set(active)),
        slices={dimension: {} for dimension in DIMENSIONS},
    )
    for key in sorted(set(active) & set(candidate)):
        before, after = active[key], candidate[key]
        version_facts = {
            dimension: str(facts.get(key, {}).get(dimension) or UNKNOWN_FACT)
            for dimension in DIMENSIONS
        }
        result.compared += 1
        changed = before.label != after.label
        for dimension, value in version_facts.items():
            bucket = result.slices[dimension].setdefault(value, Slice())
            bucket.compared += 1
            bucket.changed += int(changed)
        result.rules_gained.update(set(after.matched_rules) - set(before.matched_rules))
        result.rules_lost.update(set(before.matched_rules) - set(after.matched_rules))
        if changed:
            change = Change(before, after, version_facts)
            result.changes.append(change)
            result.transitions[change.transition] += 1
    return result


def facts_of(record: Mapping[str, Any]) -> tuple[VersionKey, dict[str, str]] | None:
    """(version, {surface, region, modality}) of a moderation.index entry or a content.versions
    upsert; None for a record that carries none of them (a delete)."""
    try:
        key = (str(record["content_id"]), int(record["content_version"]))
    except (KeyError, TypeError, ValueError):
        return None
    found = {d: str(record[d]) for d in DIMENSIONS if isinstance(record.get(d), str)}
    return (key, found) if found else None


# The threshold.
class ThresholdError(ValueError):
    """A --max-changed value that is not a share between 0 and 1 (or 0% and 100%)."""


def parse_share(text: str) -> Fraction:
    """`2%` or `0.02` -> Fraction(1, 50); exact, so 1 change in 50 is within 2%. A bare number
    is a fraction of 1, a number with `%` a percentage; anything else raises ThresholdError."""
    raw = text.strip()
    percent = raw.endswith("%")
    number = raw[:-1].strip() if percent else raw
    try:
        value = Decimal(number)
    except InvalidOperation:
        value = None
    if value is None or not value.is_finite():
        raise ThresholdError(
            f"{text!r} is not a share: write a percentage such as 2% or a fraction such as 0.02"
        )
    share = Fraction(value) / (100 if percent else 1)
    if not 0 <= share <= 1:
        bound = "0% and 100%" if percent else "0 and 1 (or a percentage such as 2%)"
        raise ThresholdError(f"{text!r} is out of range: a share between {bound}")
    return share


def percent(share: Fraction) -> str:
    """Fraction(7, 200) -> '3.50%'."""
    return f"{float(share) * 100:.2f}%"


def summary(comparison: Comparison, max_changed: Fraction | None = None) -> dict[str, Any]:
    """The comparison as JSON (the promotion record and `--json`): counts, not content."""
    out: dict[str, Any] = {
        "compared": comparison.compared,
        "changed": comparison.changed,
        "changed_fraction": round(float(comparison.fraction), 6),
        "transitions": dict(sorted(comparison.transitions.items())),
        "rules_gained": dict(sorted(comparison.rules_gained.items())),
        "rules_lost": dict(sorted(comparison.rules_lost.items())),
        "new_blocks": len(comparison.new_blocks),
        "active_only": len(comparison.active_only),
        "candidate_only": len(comparison.candidate_only),
    }
    if max_changed is not None:
        out["max_changed"] = round(float(max_changed), 6)
    return out


def render(comparison: Comparison, max_changed: Fraction | None = None) -> list[str]:
    """The diff as lines for a terminal: totals first, then where the changes are."""
    limit = f", limit {percent(max_changed)}" if max_changed is not None else ""
    lines = [
        f"content versions compared: {comparison.compared}",
        f"changed outcomes: {comparison.changed} of {comparison.compared} "
        f"({percent(comparison.fraction)}{limit})",
    ]
    if comparison.transitions:
        lines.append("by transition: " + _counts(comparison.transitions))
    rules = [f"+{rule} {n}" for rule, n in sorted(comparison.rules_gained.items())]
    rules += [f"-{rule} {n}" for rule, n in sorted(comparison.rules_lost.items())]
    if rules:
        lines.append("matched rules (+ candidate only, - active only): " + ", ".join(rules))
    for dimension in DIMENSIONS:
        buckets = comparison.slices.get(dimension) or {}
        if comparison.changed and buckets:
            shown = sorted(buckets.items(), key=lambda item: (-item[1].changed, item[0]))
            lines.append(
                f"by {dimension}: "
                + ", ".join(f"{value} {b.changed}/{b.compared}" for value, b in shown)
            )
    lines += _blocks(comparison.new_blocks)
    for name, keys in (
        ("decided by the active side only", comparison.active_only),
        ("decided by the candidate only", comparison.candidate_only),
    ):
        if keys:
            lines.append(f"{name}: {len(keys)} ({_refs(keys)})")
    return lines


def _blocks(blocks: list[Change]) -> list[str]:
    if not blocks:
        return ["new BLOCKs: 0"]
    lines = [f"new BLOCKs: {len(blocks)} ({_refs([c.candidate for c in blocks])})"]
    for change in blocks[:SAMPLES]:
        facts = ", ".join(change.facts[d] for d in DIMENSIONS)
        lines.append(
            f"  {change.candidate.ref}: {change.transition} ({facts}) rules "
            f"{list(change.active.matched_rules)} -> {list(change.candidate.matched_rules)}"
        )
    return lines


def _refs(items: list[VersionKey] | list[Decided]) -> str:
    names = [
        item.ref if isinstance(item, Decided) else f"{item[0]}@{item[1]}"
        for item in items[:SAMPLES]
    ]
    return ", ".join(names) + (", …" if len(items) > SAMPLES else "")


def _counts(counter: Counter[str]) -> str:
    return ", ".join(
        f"{name} {n}" for name, n in sorted(counter.items(), key=lambda i: (-i[1], i[0]))
    )
