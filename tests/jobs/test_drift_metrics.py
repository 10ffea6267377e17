"""modstream/jobs/moderation/drift_metrics.py through the moderation job's Decode: every admitted ok
result's scores counted by bucket, a new series' buckets registered at 0, the series bounded. No
JVM."""

from __future__ import annotations

import json
from typing import Any

import cloudpickle
import msgspec
from pyflink.common import Row

from modstream.jobs.metrics import OperatorMetrics
from modstream.jobs.moderation import drift_metrics
from modstream.jobs.moderation.config import ModerationConfig
from modstream.jobs.moderation.decode import BatchedDecode, Decode
from modstream.jobs.moderation.drift_metrics import ScoreCounts
from modstream.scanning import drift
from modstream.testing.flink import FakeMetricsContext as FakeContext
from modstream.testing.records import NOTHING_REQUIRED, T0, evidence

SERIES = "modstream/detector=offensive_text/model_version=alt-profanity-check-1.6/label=offensive"


def _decode(records: list[dict[str, Any]]) -> dict[str, Any]:
    decode = Decode(ModerationConfig(keyring=NOTHING_REQUIRED))
    context = FakeContext()
    decode.open(context)  # type: ignore[arg-type]
    for record in records:
        raw = json.dumps(record)
        list(decode.process_element(Row("detector.results", record["content_id"], raw, T0), None))
    return context.group.made


def test_decode_counts_each_ok_results_scores_by_bucket() -> None:
    made = _decode([
        evidence("c1", scores={"offensive": 0.93}),
        evidence("c2", scores={"offensive": 0.97}),
        evidence("c3", scores={"offensive": 0.02}),
        evidence("c4", status="timeout", scores=None),  # no score: not counted
        {**evidence("c5"), "scores": {"offensive": 7}},  # refused to the DLQ: not counted
    ])  # fmt: skip
    counted = {bucket: made[f"{SERIES}/bucket={bucket}/detector_scores"].count
               for bucket in drift.BUCKETS}  # fmt: skip
    assert counted == {**dict.fromkeys(drift.BUCKETS, 0), "0": 1, "90": 2}


def test_the_series_a_subtask_counts_are_bounded() -> None:
    context = FakeContext()
    counts = ScoreCounts(OperatorMetrics(context, "test"))
    for number in range(drift_metrics.MAX_SERIES + 5):
        counts.count(f"d{number}", "m", "ok", {"x": 0.5})
    assert len(counts.seen) == drift_metrics.MAX_SERIES
    assert len(context.group.made) == drift_metrics.MAX_SERIES * len(drift.BUCKETS)


def test_a_decoded_batch_answers_each_series_once_for_all_its_records() -> None:
    """A batch of 200 results in one call of decode's Python side (BatchedDecode.java calls it
    once per batch): one update per series in its answer, the new series' buckets registered at
    0 beside the two buckets seen, which Java applies to its counters (PythonMetrics.java)."""
    config = ModerationConfig(keyring=NOTHING_REQUIRED)
    decode = BatchedDecode(cloudpickle.dumps(config), 0)
    records = [
        evidence(f"c{number}", scores={"offensive": 0.97 if number % 2 else 0.02})
        for number in range(200)
    ]
    payload = msgspec.msgpack.encode(
        [["detector.results", r["content_id"], json.dumps(r), T0, "", 0] for r in records]
    )
    rows, updates = msgspec.msgpack.decode(decode.decode(payload))
    assert [row[0] for row in rows] == ["keyed"] * 200
    labels = ["detector", "offensive_text", "model_version", "alt-profanity-check-1.6"]
    labels += ["label", "offensive"]
    ours = {
        update[2][-1]: update[3]
        for update in updates
        if update[:2] == ["counter", "detector_scores"] and update[2][:6] == labels
    }
    assert ours == {**dict.fromkeys(drift.BUCKETS, 0), "0": 100, "90": 100}
    assert len([u for u in updates if u[1] == "detector_scores" and u[2][:6] == labels]) == len(
        drift.BUCKETS
    )
