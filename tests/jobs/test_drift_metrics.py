"""modstream/jobs/moderation/drift_metrics.py through the moderation job's Decode: every admitted ok
result's scores counted by bucket, a new series' buckets registered at 0, the series bounded. No
JVM."""

from __future__ import annotations

import json
from typing import Any

from pyflink.common import Row

from modstream.jobs.metrics import OperatorMetrics
from modstream.jobs.moderation import drift_metrics
from modstream.jobs.moderation.config import ModerationConfig
from modstream.jobs.moderation.decode import Decode, DecodeBatch
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


def test_a_decoded_batch_counts_each_series_once_for_all_its_records() -> None:
    """Each counter increment is a Python-to-Java call in a job: a batch of 200 results makes
    one per series (the buckets registered at 0, then the two buckets seen), not one per result."""
    decode = DecodeBatch(ModerationConfig(keyring=NOTHING_REQUIRED))
    context = FakeContext()
    decode.open(context)  # type: ignore[arg-type]
    records = [
        evidence(f"c{number}", scores={"offensive": 0.97 if number % 2 else 0.02})
        for number in range(200)
    ]
    columns = (
        ["detector.results"] * len(records),
        [record["content_id"] for record in records],
        [json.dumps(record) for record in records],
        [T0] * len(records),
        [""] * len(records),
        [0] * len(records),
    )
    list(decode.process_element(Row(*columns), None))
    made = {key: made for key, made in context.group.made.items() if key.startswith(SERIES)}
    assert {key.split("/")[-2]: (c.count, c.calls) for key, c in made.items()} == {
        **{f"bucket={bucket}": (0, 1) for bucket in drift.BUCKETS},
        "bucket=0": (100, 1),
        "bucket=90": (100, 1),
    }
