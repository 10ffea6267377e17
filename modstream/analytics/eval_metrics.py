"""Safety quality of the automated decisions against human labels: pure functions over rows.

The rows are the archive's (moderation.decisions, content.validated facts, review.tasks), as
plain mappings, so tests build them by hand and `modstream eval` passes what DuckDB read.

What is graded, for each labelled content version, is the latest *automated* decision: the
highest `decision_revision` made before the version's first human decision (trigger `review`
or `appeal`) whose trigger is neither `delete` (the author's act) nor `emergency` (an
operator's switch). A human decision is the label itself, and every revision after one keeps
the human outcome (it is sticky), so grading those would grade people against themselves.

A decision predicts "violating for reason R" when its outcome is BLOCK or RESTRICT and R is in
its `reasons`. PENDING is not a prediction: it holds the content for a person (or for missing
evidence) without saying it violates. A label says "violating for R" when it is violating with
reason R; a violating label without a reason counts only in the `(any)` row, where a
prediction is any BLOCK or RESTRICT and a label any violating one. Each reason is graded one
against the rest: a BLOCK listing both `sexual_content` and `mature_content` on a version
labelled `sexual_content` is a false positive for `mature_content`.

Rates are over every version with an automated decision (labelled or not): block rate is the
share whose graded decision is BLOCK, review rate the share with at least one review task.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from modstream.analytics.labels import Label, LabelSet, Version

POSITIVE = frozenset({"BLOCK", "RESTRICT"})
HUMAN_TRIGGERS = frozenset({"review", "appeal"})
NOT_JUDGEMENTS = frozenset({"delete", "emergency"})
ANY = "(any)"
DIMENSIONS = ("surface", "region", "modality", "model_version", "policy_version")
UNKNOWN = "(unknown)"  # a version whose content facts were not archived
NO_MODEL = "(none)"  # a decision made on no detector evidence (fast gate, hash match, limits)
Row = Mapping[str, Any]


@dataclass(frozen=True)
class Prediction:
    """The graded decision of one content version."""

    content_id: str
    content_version: int
    decision_revision: int
    outcome: str
    reasons: frozenset[str]
    policy_version: int
    model_versions: tuple[str, ...]

    @property
    def positive(self) -> bool:
        return self.outcome in POSITIVE


def natural(version: Version) -> tuple[Any, ...]:
    """Sort key: `c7-3` before `c7-24` (digit runs compared as numbers)."""
    content_id, content_version = version
    parts = re.split(r"(\d+)", content_id)
    return (tuple((int(p) if p.isdigit() else -1, p) for p in parts), content_version)


def ratio(part: int, whole: int) -> float | None:
    """part / whole, None when whole is 0 (shown as "-", never a division error)."""
    return part / whole if whole else None


@dataclass(frozen=True)
class ReasonRow:
    """Precision and recall for one reason (or `(any)`), with sample ids of the mistakes."""

    reason: str
    tp: int
    fp: int
    fn: int
    false_positives: tuple[Version, ...]
    false_negatives: tuple[Version, ...]

    @property
    def precision(self) -> float | None:
        return ratio(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> float | None:
        return ratio(self.tp, self.tp + self.fn)


@dataclass
class SliceRow:
    """The overall figures for the versions that share one value of one dimension."""

    dimension: str
    value: str
    versions: int = 0
    blocked: int = 0
    reviewed: int = 0
    labelled: int = 0
    tp: int = 0
    fp: int = 0
    fn: int = 0

    @property
    def block_rate(self) -> float | None:
        return ratio(self.blocked, self.versions)

    @property
    def review_rate(self) -> float | None:
        return ratio(self.reviewed, self.versions)

    @property
    def precision(self) -> float | None:
        return ratio(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> float | None:
        return ratio(self.tp, self.tp + self.fn)


@dataclass(frozen=True)
class Coverage:
    """How many labels were graded, and where they came from."""

    labels: int
    from_file: int
    from_reviews: int
    overlap: int
    disagree: int
    matched: int
    unmatched: int
    unmatched_samples: tuple[Version, ...]


@dataclass(frozen=True)
class EvalResult:
    """Everything `modstream eval` prints: per reason, overall rates, slices, coverage."""

    reasons: tuple[ReasonRow, ...]  # `(any)` first, then the reasons by name
    versions: int
    blocked: int
    reviewed: int
    slices: tuple[SliceRow, ...]
    coverage: Coverage
    notes: tuple[str, ...] = field(default=())
    source: str = ""  # what was graded against what, for the table's first line
    id_prefix: str = ""  # put before the labels' ids: the table shows ids without it
    # second reviews per queue and reviewer pair: queue, pair, items, agreed, kappa
    agreement: tuple[dict[str, Any], ...] = field(default=())

    @property
    def block_rate(self) -> float | None:
        return ratio(self.blocked, self.versions)

    @property
    def review_rate(self) -> float | None:
        return ratio(self.reviewed, self.versions)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: rates and precision/recall as numbers or null."""
        reasons = [
            {**asdict(row), "precision": row.precision, "recall": row.recall}
            for row in self.reasons
        ]
        slices = [
            {**asdict(row), **{name: getattr(row, name) for name in _SLICE_RATES}}
            for row in self.slices
        ]
        return {
            "source": self.source,
            "reasons": reasons,
            "versions": self.versions,
            "block_rate": self.block_rate,
            "review_rate": self.review_rate,
            "slices": slices,
            "coverage": asdict(self.coverage),
            "second_reviews": list(self.agreement),
            "notes": list(self.notes),
        }


_SLICE_RATES = ("block_rate", "review_rate", "precision", "recall")


def automated_predictions(decisions: Iterable[Row]) -> dict[Version, Prediction]:
    """Each version's graded decision (module docstring); versions with none are left out."""
    rows: dict[Version, list[Row]] = {}
    for row in decisions:
        rows.setdefault((str(row["content_id"]), int(row["content_version"])), []).append(row)
    predictions = {}
    for version, revisions in rows.items():
        human = [int(r["decision_revision"]) for r in revisions if r["trigger"] in HUMAN_TRIGGERS]
        before = min(human, default=None)
        graded = [
            r
            for r in revisions
            if r["trigger"] not in HUMAN_TRIGGERS | NOT_JUDGEMENTS
            and (before is None or int(r["decision_revision"]) < before)
        ]
        if graded:
            latest = max(graded, key=lambda r: int(r["decision_revision"]))
            predictions[version] = _prediction(version, latest)
    return predictions


def _prediction(version: Version, row: Row) -> Prediction:
    evidence = row.get("evidence") or []
    models = sorted({str(e["model_version"]) for e in evidence if e.get("model_version")})
    return Prediction(
        content_id=version[0],
        content_version=version[1],
        decision_revision=int(row["decision_revision"]),
        outcome=str(row["outcome"]),
        reasons=frozenset(str(r) for r in row.get("reasons") or ()),
        policy_version=int(row["policy_version"]),
        model_versions=tuple(models),
    )


def content_facts(contents: Iterable[Row]) -> dict[Version, Row]:
    """Each version's upload facts (the latest `upsert` row of content.validated)."""
    facts: dict[Version, Row] = {}
    for row in contents:
        if row.get("type", "upsert") != "upsert":
            continue
        version = (str(row["content_id"]), int(row["content_version"]))
        if version not in facts or int(row.get("ts") or 0) >= int(facts[version].get("ts") or 0):
            facts[version] = row
    return facts


def judge(label: Label, prediction: Prediction, reason: str) -> str | None:
    """ "tp", "fp", "fn" or None (a true negative, or a label whose reason is not known)."""
    if reason == ANY:
        predicted, actual = prediction.positive, label.violating
    elif label.violating and label.reason is None:
        return None
    else:
        predicted = prediction.positive and reason in prediction.reasons
        actual = label.violating and label.reason == reason
    if predicted:
        return "tp" if actual else "fp"
    return "fn" if actual else None


def reason_rows(
    graded: Iterable[tuple[Label, Prediction]], samples: int = 5
) -> tuple[ReasonRow, ...]:
    """`(any)` and every reason that a label or a positive prediction names."""
    pairs = sorted(graded, key=lambda pair: natural(pair[0].version))
    reasons = {label.reason for label, _ in pairs if label.violating and label.reason}
    reasons |= {r for _, p in pairs if p.positive for r in p.reasons}
    rows = []
    for reason in [ANY, *sorted(reasons)]:
        verdicts: dict[str, list[Version]] = {"tp": [], "fp": [], "fn": []}
        for label, prediction in pairs:
            verdict = judge(label, prediction, reason)
            if verdict is not None:
                verdicts[verdict].append(label.version)
        rows.append(
            ReasonRow(
                reason,
                len(verdicts["tp"]),
                len(verdicts["fp"]),
                len(verdicts["fn"]),
                tuple(verdicts["fp"][:samples]),
                tuple(verdicts["fn"][:samples]),
            )
        )
    return tuple(rows)


def slice_values(prediction: Prediction, facts: Row | None) -> dict[str, list[str]]:
    """The value(s) of each dimension for one version: a version counts under every model
    version its graded decision has evidence from."""
    facts = facts or {}
    return {
        "surface": [str(facts.get("surface") or UNKNOWN)],
        "region": [str(facts.get("region") or UNKNOWN)],
        "modality": [str(facts.get("modality") or UNKNOWN)],
        "model_version": list(prediction.model_versions) or [NO_MODEL],
        "policy_version": [str(prediction.policy_version)],
    }


def slice_rows(
    predictions: Mapping[Version, Prediction],
    facts: Mapping[Version, Row],
    reviewed: set[Version],
    labels: Mapping[Version, Label],
) -> tuple[SliceRow, ...]:
    """Rates over every decided version and `(any)` counts over the labelled ones, per value
    of each dimension, in DIMENSIONS order and then by value."""
    rows: dict[tuple[str, str], SliceRow] = {}
    for version, prediction in predictions.items():
        label = labels.get(version)
        verdict = judge(label, prediction, ANY) if label else None
        for dimension, values in slice_values(prediction, facts.get(version)).items():
            for value in values:
                row = rows.setdefault((dimension, value), SliceRow(dimension, value))
                row.versions += 1
                row.blocked += prediction.outcome == "BLOCK"
                row.reviewed += version in reviewed
                row.labelled += label is not None
                if verdict is not None:
                    setattr(row, verdict, getattr(row, verdict) + 1)
    order = {dimension: index for index, dimension in enumerate(DIMENSIONS)}
    return tuple(sorted(rows.values(), key=lambda row: (order[row.dimension], row.value)))


def evaluate(
    decisions: Iterable[Row],
    contents: Iterable[Row],
    review_tasks: Iterable[Row],
    label_set: LabelSet,
    samples: int = 5,
) -> EvalResult:
    """Grade the automated decisions against `label_set` (module docstring)."""
    predictions = automated_predictions(decisions)
    reviewed = {(str(t["content_id"]), int(t["content_version"])) for t in review_tasks}
    reviewed &= set(predictions)
    labels = label_set.labels
    graded = [(label, predictions[v]) for v, label in labels.items() if v in predictions]
    unmatched = sorted((v for v in labels if v not in predictions), key=natural)
    coverage = Coverage(
        labels=len(labels),
        from_file=label_set.from_file,
        from_reviews=label_set.from_reviews,
        overlap=label_set.overlap,
        disagree=label_set.disagree,
        matched=len(graded),
        unmatched=len(unmatched),
        unmatched_samples=tuple(unmatched[:samples]),
    )
    return EvalResult(
        reasons=reason_rows(graded, samples),
        versions=len(predictions),
        blocked=sum(p.outcome == "BLOCK" for p in predictions.values()),
        reviewed=len(reviewed),
        slices=slice_rows(predictions, content_facts(contents), reviewed, labels),
        coverage=coverage,
    )
