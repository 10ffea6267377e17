"""`modstream eval`'s table: what an EvalResult says, as text for a terminal or a demo's end.

Undefined figures (a precision with no positive prediction, a rate over no versions) print as
"-". Mistakes are listed by id only (`content_id vN`): never content, scores or rule text.
"""

from __future__ import annotations

from typing import Any

from modstream.analytics.eval_metrics import DIMENSIONS, EvalResult, ReasonRow, SliceRow
from modstream.analytics.labels import Version

DASH = "-"


def number(value: float | None) -> str:
    """A precision or recall with two decimals, or "-"."""
    return DASH if value is None else f"{value:.2f}"


def percent(value: float | None) -> str:
    return DASH if value is None else f"{100 * value:.1f}%"


def ids(versions: tuple[Version, ...], id_prefix: str = "") -> str:
    """`c7-3 v1, …`: each content id without `id_prefix` where it starts with it."""
    return (
        ", ".join(
            f"{content_id.removeprefix(id_prefix)} v{version}" for content_id, version in versions
        )
        or DASH
    )


def format_table(result: EvalResult) -> str:
    """The whole report: coverage, per reason, mistakes, slices."""
    parts = [
        _coverage(result),
        _reasons(result.reasons),
        _mistakes(result.reasons, result.id_prefix),
        _slices(result.slices),
        _agreement(result.agreement),
        *result.notes,
    ]
    return "\n\n".join(part for part in parts if part) + "\n"


def _agreement(rows: tuple[dict[str, Any], ...]) -> str:
    """Second reviews against the first, per queue and reviewer pair, with Cohen's kappa."""
    if not rows:
        return ""
    lines = ["second reviews: queue, pair, agreed/compared, Cohen's kappa"]
    lines += [
        f"  {row['queue']}  {row['pair']}  {row['agreed']}/{row['items']}  {number(row['kappa'])}"
        for row in rows
    ]
    return "\n".join(lines)


def _coverage(result: EvalResult) -> str:
    coverage = result.coverage
    both = f"{coverage.overlap} versions in both"
    if coverage.overlap:
        both += f": the file's label kept, {coverage.disagree} disagreeing"
    lines = [f"modstream eval: {result.source}"] if result.source else []
    lines += [
        f"labels: {coverage.labels} ({coverage.from_file} from the file, "
        f"{coverage.from_reviews} from review decisions, {both})",
        f"graded: {coverage.matched} labels matched an automated decision; "
        f"{coverage.unmatched} have none"
        + (
            f" (e.g. {ids(coverage.unmatched_samples, result.id_prefix)})"
            if coverage.unmatched
            else ""
        ),
        f"automated decisions: {result.versions} versions, block rate "
        f"{percent(result.block_rate)}, review rate {percent(result.review_rate)}",
    ]
    return "\n".join(lines)


def _reasons(rows: tuple[ReasonRow, ...]) -> str:
    width = max([len("reason"), *(len(row.reason) for row in rows)])
    header = f"{'reason':<{width}}  {'TP':>4} {'FP':>4} {'FN':>4}  {'precision':>9} {'recall':>6}"
    lines = [header, "-" * len(header)]
    for row in rows:
        lines.append(
            f"{row.reason:<{width}}  {row.tp:>4} {row.fp:>4} {row.fn:>4}  "
            f"{number(row.precision):>9} {number(row.recall):>6}"
        )
    return "\n".join(lines)


def _mistakes(rows: tuple[ReasonRow, ...], id_prefix: str) -> str:
    lines = []
    for row in rows:
        if row.false_positives:
            lines.append(f"  false positives, {row.reason}: {ids(row.false_positives, id_prefix)}")
        if row.false_negatives:
            lines.append(f"  false negatives, {row.reason}: {ids(row.false_negatives, id_prefix)}")
    title = "samples (ids only" + (f", after {id_prefix}" if id_prefix else "") + "):"
    return "\n".join([title, *lines]) if lines else ""


def _slices(rows: tuple[SliceRow, ...]) -> str:
    width = max([len("value"), *(len(row.value) for row in rows)])
    header = (
        f"  {'value':<{width}}  {'versions':>8} {'block':>6} {'review':>6}  "
        f"{'labelled':>8} {'TP':>4} {'FP':>4} {'FN':>4}  {'precision':>9} {'recall':>6}"
    )
    lines: list[str] = []
    for dimension in DIMENSIONS:
        chosen = [row for row in rows if row.dimension == dimension]
        if not chosen:
            continue
        lines += [f"by {dimension.replace('_', ' ')}:", header]
        for row in chosen:
            lines.append(
                f"  {row.value:<{width}}  {row.versions:>8} {percent(row.block_rate):>6} "
                f"{percent(row.review_rate):>6}  {row.labelled:>8} {row.tp:>4} {row.fp:>4} "
                f"{row.fn:>4}  {number(row.precision):>9} {number(row.recall):>6}"
            )
    return "\n".join(lines)
