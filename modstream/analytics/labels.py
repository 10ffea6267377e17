"""Human labels for `modstream eval`: the labels file, the reviewers' decisions, and which wins.

A labels file is JSON lines, one label per content version (blank lines skipped):
    {"content_id": "c7-12", "content_version": 1, "violating": true,
     "reason": "malware", "labeler": "ana"}
`violating` is a JSON boolean; `reason` is a reason code (as in decisions' `reasons`) or null,
and only a violating label has one; `labeler` is optional. Any other field, a second label for
the same version, or a malformed line is an error that names the file and the line: a gold set
with a typo must not be scored silently.

Reviewers' `review.decisions` count as labels too: BLOCK or RESTRICT is violating (with the
reviewer's `reason` when it is one of the policy's rule reasons, else null, as contract v1.1
says of a human decision's reasons), ALLOW and PROVISIONAL_ALLOW are not; PENDING is no verdict
and no label. Of several reviews of a version the latest wins (an appeal's review closes an
earlier one). Reviews the job refused (in the DLQ: unsigned, forged, stale) are not labels.
Where the file and a review label the same version the file wins: a labels file is a gold set
made on purpose to grade the system (often adjudicated, and the way reviewers are graded too),
while a review is one person's call under queue pressure. Disagreements are counted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

VIOLATING = frozenset({"BLOCK", "RESTRICT"})
NOT_VIOLATING = frozenset({"ALLOW", "PROVISIONAL_ALLOW"})
FIELDS = ("content_id", "content_version", "violating", "reason", "labeler")
Version = tuple[str, int]  # (content_id, content_version)


class LabelsError(ValueError):
    """A labels file that cannot be read as labels; the message names the file and line."""


@dataclass(frozen=True)
class Label:
    """A human's verdict on one content version, and where it came from."""

    content_id: str
    content_version: int
    violating: bool
    reason: str | None
    source: str  # "file" or "review"
    labeler: str | None = None

    @property
    def version(self) -> Version:
        return (self.content_id, self.content_version)


@dataclass(frozen=True)
class LabelSet:
    """The labels evaluated, one per version, and how the two sources met."""

    labels: dict[Version, Label]
    from_file: int
    from_reviews: int
    overlap: int  # versions labelled by both (the file's label kept)
    disagree: int  # of those, how many the review judged otherwise (violating or not)


def read_labels(path: Path) -> list[Label]:
    """The labels of a JSON-lines file, in file order."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise LabelsError(f"{path}: cannot read the labels file: {error}") from None
    # Split on "\n" only: line numbers are an editor's, whatever a string holds.
    return parse_labels((line.rstrip("\r") for line in text.split("\n")), str(path))


def parse_labels(lines: Iterable[str], name: str = "<labels>") -> list[Label]:
    """Labels from JSON lines; `name` is the file named in errors."""
    labels: list[Label] = []
    first_line: dict[Version, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        label = parse_label(line, f"{name}:{number}")
        if label.version in first_line:
            raise LabelsError(
                f"{name}:{number}: {label.content_id} version {label.content_version} is "
                f"labelled again (first at line {first_line[label.version]}): one label a version"
            )
        first_line[label.version] = number
        labels.append(label)
    return labels


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(f"field {repeated[0]!r} appears twice")
    return dict(pairs)


def parse_label(line: str, where: str) -> Label:
    """One line's label; `where` ("file:line") starts every error message."""
    try:
        record = json.loads(line, object_pairs_hook=_unique_keys)
    except ValueError as error:
        raise LabelsError(f"{where}: not a JSON object: {error}") from None
    if not isinstance(record, dict):
        raise LabelsError(f"{where}: not a JSON object")
    unknown = sorted(set(record) - set(FIELDS))
    if unknown:
        raise LabelsError(f"{where}: unknown field {unknown[0]!r} (fields: {', '.join(FIELDS)})")
    content_id, content_version = _version_of(record, where)
    violating, reason, labeler = _verdict_of(record, where)
    return Label(content_id, content_version, violating, reason, "file", labeler)


def _version_of(record: dict[str, Any], where: str) -> Version:
    content_id = record.get("content_id")
    if not isinstance(content_id, str) or not content_id:
        raise LabelsError(f"{where}: content_id must be a non-empty string")
    content_version = record.get("content_version")
    if not isinstance(content_version, int) or isinstance(content_version, bool):
        raise LabelsError(f"{where}: content_version must be an integer")
    if content_version < 1:
        raise LabelsError(f"{where}: content_version must be 1 or more")
    return content_id, content_version


def _verdict_of(record: dict[str, Any], where: str) -> tuple[bool, str | None, str | None]:
    violating = record.get("violating")
    if not isinstance(violating, bool):
        raise LabelsError(f"{where}: violating must be true or false")
    reason = record.get("reason")
    if reason is not None and (not isinstance(reason, str) or not reason):
        raise LabelsError(f"{where}: reason must be a reason code (a non-empty string) or null")
    if reason is not None and not violating:
        raise LabelsError(f"{where}: reason {reason!r} given for a label that is not violating")
    labeler = record.get("labeler")
    if labeler is not None and not isinstance(labeler, str):
        raise LabelsError(f"{where}: labeler must be a string")
    return violating, reason, labeler


def with_id_prefix(labels: Iterable[Label], id_prefix: str) -> list[Label]:
    """The labels with `id_prefix` put before each content id (a demo run's ids carry its run
    id: label `c7-12` is content `demo1a2b3c-c7-12` of that run)."""
    return [replace(label, content_id=id_prefix + label.content_id) for label in labels]


def review_labels(
    reviews: Iterable[Mapping[str, Any]],
    rule_reasons: frozenset[str],
    refused: frozenset[str] = frozenset(),
) -> list[Label]:
    """One label per version from `review.decisions` rows: the latest review with a verdict
    (by ts, then Kafka offset), reviews whose event_id is in `refused` left out."""
    latest: dict[Version, tuple[tuple[int, int, int], Mapping[str, Any]]] = {}
    for review in reviews:
        outcome = review.get("outcome")
        if outcome not in VIOLATING | NOT_VIOLATING or review.get("event_id") in refused:
            continue
        version = (str(review["content_id"]), int(review["content_version"]))
        order = (
            int(review.get("ts") or 0),
            int(review.get("_partition") or 0),
            int(review.get("_offset") or 0),
        )
        if version not in latest or order >= latest[version][0]:
            latest[version] = (order, review)
    labels = []
    for (content_id, content_version), (_, review) in sorted(latest.items()):
        violating = review["outcome"] in VIOLATING
        reason = review.get("reason")
        code = reason if violating and reason in rule_reasons else None
        labeler = review.get("reviewer_id")
        labels.append(
            Label(content_id, content_version, violating, code, "review", labeler or None)
        )
    return labels


def refused_event_ids(
    dlq: Iterable[Mapping[str, Any]], topic: str = "review.decisions"
) -> set[str]:
    """Event ids of `topic` records the job sent to the DLQ (their `raw` JSON, when it is the
    record itself rather than a reference)."""
    refused: set[str] = set()
    for row in dlq:
        if not str(row.get("source_topic") or "").endswith(topic):
            continue
        try:
            raw = json.loads(row.get("raw") or "")
        except (TypeError, ValueError):
            continue
        if isinstance(raw, dict) and isinstance(raw.get("event_id"), str):
            refused.add(raw["event_id"])
    return refused


def merge(file_labels: Iterable[Label], reviews: Iterable[Label]) -> LabelSet:
    """The file's labels and the reviewers', one per version: the file's where both label it."""
    labels = {label.version: label for label in file_labels}
    from_file = len(labels)
    from_reviews = overlap = disagree = 0
    for review in reviews:
        kept = labels.get(review.version)
        if kept is None:
            labels[review.version] = review
            from_reviews += 1
        elif kept.source == "file":
            overlap += 1
            disagree += kept.violating != review.violating
    return LabelSet(labels, from_file, from_reviews, overlap, disagree)
