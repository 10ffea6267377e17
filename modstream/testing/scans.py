"""Scan requests and fake detectors for tests of the scan path (modstream/detectors/scan.py,
modstream/scanning/) and of a detector of one's own.

`request(id, text)` is a scan request as the moderation job sends it; `loader` reads its media
from the request itself; `Counting` and `Reading` are detectors with fixed answers, for tests of
what the scan path does around a model. A test of a real detector runs `scan_batch` with it:

    from modstream.detectors.scan import scan_batch
    from modstream.testing.records import T0
    from modstream.testing.scans import loader, request

    [result] = scan_batch(MyDetector(), [request("a", "some text")], loader, T0).results
    assert result["status"] == "ok" and result["scores"]["offensive"] < 0.5
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from modstream.detectors.detector import Evidence, Item, MediaError
from modstream.testing.records import T0


class Counting:
    """A fake text detector (offensive_text) that counts its model calls: every item scores
    offensive 0.25, the text "corrupt" is a MediaError."""

    name = "offensive_text"
    model_version = "fake-1"
    modalities: tuple[str, ...] = ("text",)
    labels: tuple[str, ...] = ("offensive",)

    def __init__(self) -> None:
        self.calls: list[int] = []

    def detect(self, items: Sequence[Item]) -> list[dict[str, float] | MediaError]:
        self.calls.append(len(items))
        return [
            MediaError("corrupt") if item.text == "corrupt" else {"offensive": 0.25}
            for item in items
        ]


def request(request_id: str, text: str | None = None, **extra: Any) -> dict[str, Any]:
    """A scan.requests.text record for offensive_text, live, due a minute after T0; `extra`
    overrides any field (modality, mime_type, media_ref...)."""
    return {
        "request_id": request_id,
        "content_id": f"c-{request_id}",
        "content_version": 1,
        "detector": "offensive_text",
        "segment_id": None,
        "segments": 1,
        "modality": "text",
        "mime_type": "text/plain",
        "priority": "live",
        "attempt": 1,
        "deadline_ts": T0 + 60_000,
        "text": text,
        "ts": T0,
        **extra,
    }


def loader(item: dict[str, Any]) -> Item:
    """A media loader over the request's own `text`: "flaky" is a transient storage error, no
    text a permanent MediaError."""
    if item["text"] == "flaky":
        raise OSError("storage timeout")
    if item["text"] is None:
        raise MediaError("no media")
    return Item(text=item["text"])


class Reading(Counting):
    """A reader of text in media: scores with findings (modstream/detectors/detector.py:
    Evidence)."""

    def detect(self, items: Sequence[Item]) -> list[Evidence | MediaError]:  # type: ignore[override]
        return [Evidence({"offensive": 0.9}, ({"box": [1, 2, 3, 4], "confidence": 0.8},))]
