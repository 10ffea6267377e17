"""The scan job serves live before backfill (docs/scanning.md, "Cost order"): within one batch
the model sees the live requests first and their results are emitted first. Across batches the
Java Batcher keeps arrival order (a documented limit)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from modstream.detectors.detector import Item, MediaError
from modstream.jobs.scan.job import ScanConfig
from modstream.scanning.batch import Handled, scan_requests
from modstream.testing.records import T0
from modstream.testing.scans import loader, request


class Recording:
    name = "offensive_text"
    model_version = "rec-1"
    modalities = ("text",)
    labels = ("offensive",)

    def __init__(self) -> None:
        self.seen: list[str | None] = []

    def detect(self, items: Sequence[Item]) -> list[dict[str, float] | MediaError]:
        self.seen += [item.text for item in items]
        return [{"offensive": 0.1} for _ in items]


def test_a_mixed_batch_scores_and_answers_live_requests_before_backfill() -> None:
    batch = [
        request("b1", "backfill one", priority="backfill", ts=T0 - 10),
        request("l1", "live one", ts=T0),
        request("b2", "backfill two", priority="backfill", ts=T0 - 5),
        request("l2", "live two", ts=T0 + 1),
    ]
    detector = Recording()
    handled = Handled()
    scan_requests(ScanConfig(), batch, T0 + 2, handled, lambda _: detector, loader)
    assert detector.seen == ["live one", "live two", "backfill one", "backfill two"]
    answered = [json.loads(v)["content_id"] for v in handled.values]
    assert answered == ["c-l1", "c-l2", "c-b1", "c-b2"]
