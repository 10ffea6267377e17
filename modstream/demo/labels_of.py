"""The demo's labelled set: synthetic "human" labels for `modstream eval` after `make demo`.

Nobody looked at the demo's content: it is generated. These labels are made by a small model
of a labeller, so that the evaluation has something honest to grade, with mistakes both ways:
    python -m modstream.demo.labels_of > deploy/demo/labels.jsonl
    python -m modstream.demo.labels_of --detectors real > deploy/demo/labels-real.jsonl
tests/modstream/test_demo_labels.py checks the shipped files are what this writes.

The labelled versions are the first VERSIONS of the seed-7 workload (ids `c7-0` … `c7-59`, the
edit `c7-4` v2 and the hash-bank upload `banked-1`), which every demo run sends whatever its
`--events` (60 or more): ids carry no run id, `modstream eval --last-demo` puts it on. A
version the workload's own reviewers decide (`c7-3`; the second-reviewed `c7-22` and `c7-34`,
modstream/demo/workload_extras.py) is left to those reviews: review decisions count as labels, the
latest one per version, so a disputed second review is labelled by its escalation's decision.

The labeller sees the "true" content. For generated content, the truth of each detector's
label is the generated score (its highest over segments) plus the labeller's own noise
(N(0, NOISE)), or a fresh draw when the detector never answered (timeout, missing evidence).
Its guide, with thresholds a little apart from the policy's (policy_rules/global.yaml):
malware >= 0.75 -> `malware`; nudity >= 0.9 on a public surface, or >= 0.65 for minors ->
`sexual_content`; nudity >= 0.75 elsewhere -> `mature_content`; offensive text >= 0.8 ->
`harassment` (any surface, dm included); a sha256 in the known-bad bank -> `known_match`; the
first reason in that order wins. Then MISSES clean versions are marked violating on purpose
(what a model misses), the last of them without a reason. With `--detectors real`, every
upload is real (modstream/demo/demo_workload.py): the abusive sample texts are `harassment`, the
generated noise images, videos and silent audio are clean, and the media kinds with words
(modstream/demo/media.py: text on an image, speech, a video that shows or says it) are
`harassment` when their words are offensive and clean otherwise (never one of the misses).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from modstream.demo import media as demo_media
from modstream.demo.demo_workload import (
    SAMPLE_TEXTS,
    bank_addition_after_allow,
    real_content,
    upserts,
)
from modstream.demo.workload import T0, Line, generate

SEED = 7  # the demo's workload
VERSIONS = 60  # labelled: the first 60 versions (`modstream demo --events 60` sends them all)
REAL_EVENTS = 200  # `make demo` (real detectors): its bank addition depends on the count
LABEL_SEED = 16  # the labeller's own randomness
NOISE = 0.08
MISSES = 3
ABUSIVE = frozenset({SAMPLE_TEXTS[4], SAMPLE_TEXTS[6]})  # what a reader calls harassment
LABELLERS = ("synthetic-a", "synthetic-b")
MODALITIES = ("text", "image", "video", "audio")
MISSED_REASON = {"text": "harassment", "image": "sexual_content", "video": "sexual_content"}
Truth = dict[str, float]  # detector label ("malware", "nsfw", "offensive") -> true score


def derive(real: bool = False) -> list[dict[str, Any]]:
    """The labels, in workload order, as the labels file's records."""
    rng = random.Random(LABEL_SEED)
    lines = generate(seed=SEED, versions=REAL_EVENTS if real else VERSIONS, prefix="")
    scanned: set[str] = set()
    kinds = demo_media.kinds_of(upserts(lines)) if real else {}
    if real:
        with tempfile.TemporaryDirectory() as media:
            lines, scanned = real_content(lines, Path(media), T0)
    retro = bank_addition_after_allow(lines, "")
    banked = {
        line["value"]["hash"] for line in [*lines, *([retro] if retro else [])]
        if line["topic"] == "hash.bank" and line["value"].get("op") == "add"
    }  # fmt: skip
    scores = _scores(lines)
    truths: dict[str, Truth] = {}  # per content: the workload's edit changes nothing
    labels = []
    for upload in _uploads(lines, extras=not real):
        content_id = upload["content_id"]
        if content_id not in truths:
            # Its own noise per content: the same truth in both label sets.
            noise = random.Random(f"{LABEL_SEED}:{content_id}")
            truths[content_id] = _truth(noise, scores.get((content_id, 1), {}))
        reason = _reason(upload, truths[content_id], banked, content_id in scanned)
        record = _record(upload, reason, rng.choice(LABELLERS))
        labels.append(_with_media_kind(record, kinds.get(content_id)))
    _add_misses(rng, labels)
    return labels


def _uploads(lines: Iterable[Line], extras: bool) -> list[dict[str, Any]]:
    """The labelled uploads in workload order: version 1 of `c7-0` … `c7-59` and, with
    `extras`, the edit and the hash-bank upload; less those a reviewer in the workload decides."""
    wanted = {(f"c{SEED}-{index}", 1) for index in range(VERSIONS)}
    if extras:
        wanted |= {("banked-1", 1), (f"c{SEED}-4", 2)}
    wanted -= {
        (line["value"]["content_id"], line["value"]["content_version"])
        for line in lines
        if line["topic"] == "review.decisions"
    }
    uploads = []
    for line in lines:
        value = line["value"]
        if line["topic"] != "content.versions" or not isinstance(value, dict):
            continue
        version = (value.get("content_id"), value.get("content_version"))
        if value.get("type") != "upsert" or value.get("modality") not in MODALITIES:
            continue  # a delete, or a malformed record the job dead-letters
        if version in wanted:
            wanted.discard(version)
            uploads.append(value)
    return uploads


def _scores(lines: Iterable[Line]) -> dict[tuple[str, int], Truth]:
    """The highest generated score of each label per version, over segments."""
    scores: dict[tuple[str, int], Truth] = {}
    for line in lines:
        value = line["value"]
        if line["topic"] != "detector.results" or not isinstance(value, dict):
            continue
        if value.get("status") != "ok" or not isinstance(value.get("scores"), dict):
            continue
        seen = scores.setdefault((value["content_id"], value["content_version"]), {})
        for label, score in value["scores"].items():
            seen[label] = max(seen.get(label, 0.0), float(score))
    return scores


def _truth(noise: random.Random, scores: Truth) -> Truth:
    """What the content really is, per label: the score plus the labeller's noise."""
    truth = {}
    for label in ("malware", "nsfw", "offensive"):
        seen = scores.get(label)
        base = seen if seen is not None else noise.betavariate(1.2, 14)
        truth[label] = min(1.0, max(0.0, base + noise.gauss(0.0, NOISE)))
    return truth


def _reason(upload: dict[str, Any], truth: Truth, banked: set[str], scanned: bool) -> str | None:
    """The labelling guide (module docstring): the first reason that applies, or None.
    `scanned`: the upload is real content (`--detectors real`), judged as what it is."""
    modality = upload["modality"]
    visual = modality in ("image", "video") and not scanned  # real images: noise, clean
    if upload["audience"] == "minor":
        explicit = 0.65
    else:
        explicit = 0.9 if upload["surface"] in ("public_post", "profile", "live") else 2.0
    if modality == "text":
        abusive = upload.get("text") in ABUSIVE if scanned else truth["offensive"] >= 0.8
    else:
        abusive = False
    found = [
        ("known_match", upload.get("sha256") in banked),
        ("malware", modality != "text" and not scanned and truth["malware"] >= 0.75),
        ("sexual_content", visual and truth["nsfw"] >= explicit),
        ("harassment", abusive),
        ("mature_content", visual and truth["nsfw"] >= 0.75),
    ]
    return next((reason for reason, applies in found if applies), None)


def _record(upload: dict[str, Any], reason: str | None, labeller: str) -> dict[str, Any]:
    return {
        "content_id": upload["content_id"],
        "content_version": upload["content_version"],
        "violating": reason is not None,
        "reason": reason,
        "labeler": labeller,
        "_modality": upload["modality"],  # dropped before writing
    }


def _with_media_kind(
    record: dict[str, Any], kind: demo_media.MediaKind | None
) -> dict[str, Any]:  # fmt: skip
    """A real-media kind's label (modstream/demo/media.py): the reader hears or sees its words,
    `harassment` when they are offensive, clean otherwise; never one of the MISSES."""
    if kind is None:
        return record
    reason = "harassment" if kind.offensive else None
    return {**record, "violating": kind.offensive, "reason": reason, "_kind": kind.name}


def _add_misses(rng: random.Random, labels: list[dict[str, Any]]) -> None:
    """MISSES clean versions labelled violating: what the models miss; the last one with no
    reason (a labeller who flags without picking a code). The real-media kinds are not among
    them: their labels are what the demo checks its decisions against."""
    clean = [label for label in labels if not label["violating"] and "_kind" not in label]
    for index, label in enumerate(rng.sample(clean, min(MISSES, len(clean)))):
        label["violating"] = True
        last = index == MISSES - 1
        label["reason"] = None if last else MISSED_REASON.get(label["_modality"])


def write(labels: Iterable[dict[str, Any]], out: Any) -> None:
    for label in labels:
        record = {key: value for key, value in label.items() if not key.startswith("_")}
        out.write(json.dumps(record) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m modstream.demo.labels_of", description=__doc__)
    parser.add_argument("--detectors", choices=["generated", "real"], default="generated")
    args = parser.parse_args(argv)
    write(derive(real=args.detectors == "real"), sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
