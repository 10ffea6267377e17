"""What a `modstream demo` run must reach, from the records it sent and read back: every
scanned upload answered by each detector its policy requires (`expected_scans`, `unanswered`),
no version still `scanning` long after its deadline (`overdue`), and with real detectors each
real media kind decided as its label says (`read_media`, issue 28 item 8).

Pure: the demo's waits (modstream/demo/wait.py) and its summary (modstream/demo/summary.py)
read the topics and call these.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable
from typing import Any

from modstream.moderation.state import EVIDENCE_GRACE_MS

ScanKey = tuple[str, int, str]  # (content_id, content_version, detector)


def _uploads(lines: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The well-formed `upsert` records among the run's lines."""
    return [
        value
        for line in lines
        if line.get("topic") == "content.versions"
        and isinstance(value := line.get("value"), dict)
        and value.get("type") == "upsert"
        and isinstance(value.get("content_id"), str)
        and isinstance(value.get("content_version"), int)
        and isinstance(value.get("ts"), int)
    ]


def _spec(policy: dict[str, Any], modality: Any) -> dict[str, Any]:
    spec = (policy.get("detectors") or {}).get(modality)
    return spec if isinstance(spec, dict) else {}


def expected_scans(
    lines: Iterable[dict[str, Any]], policy: dict[str, Any], scanned: set[str]
) -> set[ScanKey]:
    """Each scanned upload's required detectors (the policy's `detectors.<modality>.required`):
    a result of each must be in before the run may end (a gate's result alone is not the model's
    answer)."""
    return {
        (upload["content_id"], upload["content_version"], str(detector))
        for upload in _uploads(lines)
        if upload["content_id"] in scanned
        for detector in _spec(policy, upload.get("modality")).get("required") or ()
    }


def settled(decisions: Iterable[dict[str, Any]]) -> set[tuple[str, int]]:
    """The versions whose latest decision no longer waits for evidence (deleted, blocked by a
    bank match, withheld by a failed gate, decided): a detector they never asked is not waited
    for."""
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for decision in decisions:
        version = (decision["content_id"], decision["content_version"])
        if version not in latest or (
            decision["decision_revision"] > latest[version]["decision_revision"]
        ):
            latest[version] = decision
    return {version for version, decision in latest.items() if decision["state"] != "scanning"}


def unanswered(
    expected: set[ScanKey],
    results: Iterable[dict[str, Any]],
    done: Collection[tuple[str, int]] = (),
) -> set[ScanKey]:
    """The expected (version, detector) pairs no result answers yet (any status: a timeout or an
    error is an answer), less those of versions already `done` (`settled`)."""
    answered = {(r["content_id"], r["content_version"], r["detector"]) for r in results}
    return {key for key in expected - answered if key[:2] not in done}


def overdue(
    latest: dict[tuple[str, int], dict[str, Any]],
    lines: Iterable[dict[str, Any]],
    policy: dict[str, Any],
    reached: int,
) -> list[tuple[str, int]]:
    """The versions whose latest decision is still `scanning` though event time (`reached`: the
    newest decision `ts` of the run) passed their deadline by more than the wait a deadline may
    take (a full `deadline_ms` more for the detectors, plus the evidence grace: operators/
    timers.py `postponed`). Each should have had an `evidence` or a `deadline` revision."""
    found = []
    for upload in _uploads(lines):
        version = (upload["content_id"], upload["content_version"])
        decision = latest.get(version)
        deadline_ms = _spec(policy, upload.get("modality")).get("deadline_ms")
        if decision is None or decision.get("state") != "scanning":
            continue
        if not isinstance(deadline_ms, int):
            continue
        if reached > upload["ts"] + 2 * deadline_ms + EVIDENCE_GRACE_MS:
            found.append(version)
    return sorted(set(found))


def read_media_outcomes(
    latest: dict[tuple[str, int], dict[str, Any]], kinds: dict[str, Any]
) -> list[dict[str, Any]]:
    """Each real-media kind's version (modstream/demo/media.py, `--detectors real`) with the
    outcome its label wants (BLOCK or RESTRICT for offensive words, ALLOW otherwise), the
    outcome it got, and the media times (`finding_ms`) its decision cites from the readers
    (ocr_text, speech_text); `ok` when the outcome is the wanted one and an offensive one's
    decision cites where in the media the words are (an image has no time: its reading is
    cited, without one)."""
    checked = []
    for content_id, kind in sorted(kinds.items()):
        decision = latest.get((content_id, 1))
        outcome = decision["outcome"] if decision else None
        wanted = ("BLOCK", "RESTRICT") if kind.offensive else ("ALLOW",)
        cited = [
            entry
            for entry in (decision or {}).get("evidence") or []
            if entry.get("detector") in ("ocr_text", "speech_text")
        ]
        times = sorted({entry["finding_ms"] for entry in cited if "finding_ms" in entry})
        timed = kind.modality == "image" or bool(times) or not kind.offensive
        checked.append(
            {
                "content_id": content_id,
                "kind": kind.name,
                "wanted": "|".join(wanted),
                "outcome": outcome,
                "finding_ms": times,
                "ok": outcome in wanted and bool(cited) and timed,
            }
        )
    return checked


def read_media(
    latest: dict[tuple[str, int], dict[str, Any]], lines: Iterable[dict[str, Any]]
) -> list[dict[str, Any]]:
    """How the real media kinds of a `--detectors real` run were decided (`lines`: what it
    sent; modstream/demo/media.py picks the kinds from its uploads)."""
    from modstream.demo.media import kinds_of

    return read_media_outcomes(latest, kinds_of(_uploads(lines)))


def read_media_lines(summary: dict[str, Any]) -> list[str]:
    """The summary's rows for `results_by_detector`, and for `read_media` (`--detectors real`)
    each kind's version, the outcome it got and the one wanted, and its finding times."""
    counted = summary["results_by_detector"].items()
    rows = [f"  {'detector results':<28} " + ", ".join(f"{k} {n}" for k, n in counted)]
    for kind in summary["read_media"]:
        times = ", ".join(f"{ms} ms" for ms in kind["finding_ms"]) or "no time (image)"
        rows.append(
            f"  {kind['kind']:<28} {kind['content_id']}: {kind['outcome']} "
            f"(wanted {kind['wanted']}; found at {times}){'' if kind['ok'] else '  WRONG'}"
        )
    return rows


def results_by_detector(evidence: Iterable[dict[str, Any]]) -> dict[str, int]:
    """A run's detector results per detector (any status)."""
    return dict(sorted(Counter(str(result["detector"]) for result in evidence).items()))
