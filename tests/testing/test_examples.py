"""The examples of docs/TESTING.md, run: a policy rule test and a detector test written with
modstream.testing, and a check that the document shows them as they are here."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from modstream.detectors.detector import Item, MediaError
from modstream.detectors.scan import scan_batch
from modstream.testing.policies import global_document
from modstream.testing.records import T0
from modstream.testing.scans import loader, request
from modstream.testing.versions import Version, context

TESTING_MD = Path(__file__).resolve().parents[2] / "docs" / "TESTING.md"

# example: policy rule
OFFENSIVE_DM = {
    "id": "offensive-dm-review",
    "when": "score('offensive_text', 'offensive') >= 0.9 and surface == 'dm'",
    "outcome": "PENDING",
    "reason": "harassment",
    "review": {"queue": "direct_messages", "priority": 1},
}


def test_an_offensive_direct_message_waits_for_a_reviewer() -> None:
    shipped = global_document()["rules"]
    version = Version(context(rules=[OFFENSIVE_DM, *shipped]))  # the shipped rules and this one
    version.upload(surface="dm")
    assert version.last["outcome"] == "PROVISIONAL_ALLOW"  # text on a low-risk surface
    version.evidence(at=T0 + 1, scores={"offensive": 0.93})
    assert version.last["outcome"] == "PENDING"  # without the rule: RESTRICT (offensive-limit)
    assert version.last["matched_rules"] == ["offensive-dm-review", "offensive-limit"]
    queues = [(task["queue"], task["priority"]) for task in version.of("review.tasks")]
    assert queues == [("direct_messages", 1), ("text", 2)]  # one task per matched rule's queue


# end example


# example: detector
class Shouting:
    """A detector of one's own: the share of capital letters is how offensive a text is."""

    name = "offensive_text"
    model_version = "shouting-1"
    modalities = ("text",)
    labels = ("offensive",)

    def detect(self, items: Sequence[Item]) -> list[dict[str, float] | MediaError]:
        texts = [item.text or "" for item in items]
        return [{"offensive": sum(c.isupper() for c in t) / max(len(t), 1)} for t in texts]


def test_my_detector_answers_every_request_of_a_batch() -> None:
    batch = [request("a", "CALM DOWN"), request("b", "calm down"), request("c", None)]
    outcome = scan_batch(Shouting(), batch, loader, T0)
    by_id = {result["content_id"]: result for result in outcome.results}
    assert by_id["c-a"]["scores"] == {"offensive": 8 / 9}
    assert by_id["c-b"]["scores"] == {"offensive": 0.0}
    assert by_id["c-c"]["status"] == "error"  # no media: answered, and dead-lettered
    assert [refused["request_id"] for refused, _ in outcome.permanent] == ["c"]


# end example


def test_the_document_shows_the_examples_as_they_run() -> None:
    source = Path(__file__).read_text(encoding="utf-8")
    examples = re.findall(r"# example: [a-z ]+\n(.*?)\n\n# end example", source, re.DOTALL)
    shown = TESTING_MD.read_text(encoding="utf-8")
    assert len(examples) == 2
    for example in examples:
        assert example.strip() in shown
