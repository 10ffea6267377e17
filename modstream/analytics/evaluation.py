"""`modstream eval`'s service: read a deployment's archive and a labels file, grade, format.

The grading itself is pure (modstream/analytics/eval_metrics.py, modstream/analytics/labels.py);
this module only reads the archive (docs/ANALYSTS.md, "The archive"), the labels file and the policy
whose rule reasons a reviewer's `reason` may be, and hands plain rows over. The demo calls `run` and
`format_table` at its end with its shipped labels (`demo_labels`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from modstream.analytics.eval_metrics import EvalResult, evaluate
from modstream.analytics.eval_table import format_table
from modstream.analytics.labels import (
    merge,
    read_labels,
    refused_event_ids,
    review_labels,
    with_id_prefix,
)
from modstream.core.config import Settings
from modstream.stack import deployments

__all__ = ["EvalResult", "EvaluationError", "demo_labels", "format_table", "run"]

# The columns each archived table must have for grading (the archive holds more).
COLUMNS = {
    "decisions": (
        "content_id, content_version, decision_revision, outcome, reasons, trigger, "
        "policy_version, evidence"
    ),
    "contents": "content_id, content_version, type, surface, region, modality, ts",
    "review_tasks": "content_id, content_version",
    "review_decisions": (
        "event_id, content_id, content_version, outcome, reason, reviewer_id, ts, "
        "_partition, _offset"
    ),
    "dlq": "source_topic, raw",
}
Rows = list[dict[str, Any]]
# What the agreement of second reviews reads (`second_reviews`).
SECOND_REVIEW_TASKS = "content_id, task_id, queue, second_review"
SECOND_REVIEW_DECISIONS = "event_id, content_id, task_id, reviewer_id, outcome, ts"


class EvaluationError(RuntimeError):
    """An archive or policy that cannot be read for grading; the message says which."""


def demo_labels(settings: Settings, detectors: str = "generated") -> Path:
    """The demo's shipped labels (synthetic, modstream/demo/labels_of.py): for the generated
    detectors, or for `--detectors real` (real texts and images, scanned by the models)."""
    name = "labels-real.jsonl" if detectors == "real" else "labels.jsonl"
    return settings.project_root / "deploy" / "demo" / name


def rule_reasons(policy_path: Path) -> frozenset[str]:
    """The reasons of a policy document's rules: a reviewer's `reason` among them is a code."""
    try:
        document = yaml.safe_load(policy_path.read_text(encoding="utf-8"))
        rules = document["rules"]
        return frozenset(str(rule["reason"]) for rule in rules if rule.get("reason"))
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError) as error:
        raise EvaluationError(
            f"{policy_path}: cannot read the policy's rule reasons: {error}"
        ) from None


def read_archive(settings: Settings, prefix: str | None, table: str) -> Rows:
    """One archived table's grading columns, as rows (none when nothing is archived yet),
    read through modstream.analytics.streams, the one place that knows how the archive is stored."""
    import duckdb

    from modstream.analytics import streams as analytics

    try:
        with analytics.connect(settings, prefix) as connection:
            result = connection.sql(f'SELECT {COLUMNS[table]} FROM "{table}"')
            rows: Rows = result.to_arrow_table().to_pylist()
    except duckdb.Error as error:
        raise EvaluationError(f"cannot read the archived {table}: {error}") from None
    return rows


def run(
    settings: Settings,
    prefix: str | None,
    labels_path: Path,
    id_prefix: str = "",
    *,
    policy_path: Path | None = None,
    reviews: bool = True,
    samples: int = 5,
) -> EvalResult:
    """Grade the deployment `prefix`'s archived decisions against the labels file (its ids
    prefixed with `id_prefix`) and, with `reviews`, its reviewers' decisions."""
    file_labels = with_id_prefix(read_labels(labels_path), id_prefix)
    root = deployments.archive_root(settings, prefix)
    decisions = read_archive(settings, prefix, "decisions")
    human = []
    if reviews:
        policy = policy_path or settings.project_root / "policy_rules" / "global.yaml"
        refused = frozenset(refused_event_ids(read_archive(settings, prefix, "dlq")))
        reviewed = read_archive(settings, prefix, "review_decisions")
        human = review_labels(reviewed, rule_reasons(policy), refused)
    result = evaluate(
        decisions,
        read_archive(settings, prefix, "contents"),
        read_archive(settings, prefix, "review_tasks"),
        merge(file_labels, human),
        samples,
    )
    notes = []
    if not decisions:
        notes.append(f"note: no decisions archived in {root}: archive the deployment first")
    elif not result.coverage.matched:
        notes.append(
            f"note: no label matched a decision of {prefix or 'the default deployment'}"
            f" (label ids prefixed with {id_prefix!r}; see --id-prefix)"
        )
    source = f"{labels_path} against the archive of {prefix or 'the default deployment'} ({root})"
    agreement = tuple(second_reviews(settings, prefix)) if reviews else ()
    return replace(
        result, notes=tuple(notes), source=source, id_prefix=id_prefix, agreement=agreement
    )


def second_reviews(settings: Settings, prefix: str | None) -> Rows:
    """Agreement of second reviews per queue and reviewer pair, with Cohen's kappa
    (modstream/review/agreement.py `second_review_summary`), from the archived review tasks and the
    review decisions the job did not refuse; none from an archive written before review tasks
    carried `second_review`."""
    from modstream.review.agreement import second_review_summary

    try:
        tasks = _select(settings, prefix, "review_tasks", SECOND_REVIEW_TASKS)
    except EvaluationError:
        return []  # archived before the column existed: no second reviews in it
    refused = refused_event_ids(read_archive(settings, prefix, "dlq"))
    reviewed = _select(settings, prefix, "review_decisions", SECOND_REVIEW_DECISIONS)
    kept = [row for row in reviewed if row["event_id"] not in refused]
    return second_review_summary(tasks, kept)


def _select(settings: Settings, prefix: str | None, table: str, columns: str) -> Rows:
    import duckdb

    from modstream.analytics import streams as analytics

    try:
        with analytics.connect(settings, prefix) as connection:
            rows: Rows = (
                connection.sql(f'SELECT {columns} FROM "{table}"').to_arrow_table().to_pylist()
            )
    except duckdb.Error as error:
        raise EvaluationError(f"cannot read the archived {table}: {error}") from None
    return rows
