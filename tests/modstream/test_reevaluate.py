"""Selecting what to re-evaluate from moderation.index, pacing the requests, showing progress."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from kafka.consumer.fetcher import ConsumerRecord

from modstream.core import kafkaio
from modstream.core.progress import Progress
from modstream.ops import reevaluate
from modstream.ops.reevaluate import (
    DELETED,
    HUMAN,
    Selection,
    Selector,
    paced,
    requests,
    scan_index,
)


def entry(cid: str, version: int = 1, **overrides: Any) -> dict[str, Any]:
    """A valid moderation.index record (modstream/contract/outputs.py IndexEntry)."""
    return {
        "content_id": cid,
        "content_version": 1,
        "decision_revision": 1,
        "outcome": "ALLOW",
        "state": "approved",
        "policy_id": "global",
        "policy_version": version,
        "surface": "comment",
        "region": "EU",
        "modality": "image",
        "detectors": ["media_check"],
        "human": False,
        "upload_ts": 5,
        "ts": 10,
        **overrides,
    }


def record(value: dict[str, Any] | bytes | None, key: str | None = None) -> ConsumerRecord:
    raw = json.dumps(value).encode() if isinstance(value, dict) else value
    size = len(raw) if raw is not None else -1
    encoded = key.encode() if key is not None else None
    return ConsumerRecord("t", 0, 0, 0, 0, 0, encoded, raw, [], None, -1, size, -1)


def chosen(entries: list[dict[str, Any]], selection: Selection) -> list[tuple[str, int]]:
    selector = Selector(selection)
    for value in entries:
        selector.add(value)
    return selector.chosen()


def test_only_versions_decided_under_an_older_policy_version_and_in_scope() -> None:
    entries = [
        entry("a", 2),  # already under v2
        entry("b", 1),  # selected
        entry("c", 0),  # selected: any older version
        entry("e", 1, policy_id="other"),  # another policy
        entry("f", 1, surface="dm"),
        entry("g", 1, region="US"),
        entry("h", 1, modality="text"),
    ]
    scoped = Selection("global", 2, surface="comment", region="EU", modality="image")
    assert chosen(entries, scoped) == [("b", 1), ("c", 1)]
    assert chosen(entries, Selection("global", 2)) == [
        ("b", 1),
        ("c", 1),
        ("f", 1),
        ("g", 1),
        ("h", 1),
    ]
    assert chosen(entries, Selection("global", 1)) == [("c", 1)]


def test_the_time_range_bounds_the_decision_ts_or_the_upload_ts() -> None:
    entries = [
        entry("early", upload_ts=1, ts=100),
        entry("late", upload_ts=50, ts=60),
        entry("unknown", upload_ts=None, ts=70),
    ]
    by_decision = Selection("global", 2, since_ts=60, until_ts=100)
    assert chosen(entries, by_decision) == [("late", 1), ("unknown", 1)]  # [since, until)
    by_upload = Selection("global", 2, since_ts=0, until_ts=10, time_field="upload")
    assert chosen(entries, by_upload) == [("early", 1)]  # no upload ts: outside any range
    assert chosen(entries, Selection("global", 2, since_ts=40, time_field="upload")) == [
        ("late", 1)
    ]


def test_human_decisions_and_deleted_versions_are_skipped_and_counted() -> None:
    selector = Selector(Selection("global", 2))
    for value in (
        entry("kept"),
        entry("reviewed", human=True, outcome="BLOCK"),
        entry("gone", state="deleted", human=True),
        entry("current", 2, human=True),  # not in scope: decided under v2 already
    ):
        selector.add(value)
    assert selector.chosen() == [("kept", 1)]
    assert selector.counts() == {1: 1, HUMAN: 1, DELETED: 1}
    lines = reevaluate.summary(selector, sample=5)
    assert lines[0] == (
        "reevaluate: 1 content version(s) decided before global v2 (v1: 1), from 4 index record(s)"
    )
    assert "skipped 1 human decision(s) (sticky: re-evaluation cannot change them)" in lines[1]
    assert "and 1 deleted version(s)" in lines[1]
    assert lines[2:] == ["reevaluate:   kept v1"]


def test_the_latest_record_per_version_wins_until_compaction_has_run() -> None:
    selector = Selector(Selection("global", 2))
    selector.add(entry("a"))
    selector.add(entry("a", 2, decision_revision=2))  # re-decided under v2 since: out
    selector.add(entry("b"))
    selector.add(entry("b", decision_revision=2, human=True))  # a reviewer decided since
    selector.add(entry("c", state="deleted"))
    selector.add(entry("d", content_version=2))  # versions are apart: "d" v1 stays
    selector.add(entry("d"))
    assert selector.chosen() == [("d", 1), ("d", 2)]
    assert selector.counts() == {1: 2, HUMAN: 1, DELETED: 1}
    # Memory: only versions in scope are kept, never the ones already current.
    assert set(selector.marks) == {"1:b", "1:c", "1:d", "2:d"}


def test_a_content_id_with_colons_survives_the_key() -> None:
    assert chosen([entry("a:b:3", content_version=7)], Selection("global", 2)) == [("a:b:3", 7)]


def test_scan_index_skips_malformed_records_and_honours_tombstones() -> None:
    warnings: list[str] = []
    records = [
        record(entry("b")),
        record(b"[" * 50_000),
        record({**entry("x"), "decision_revision": "one"}),
        record({"content_id": "y"}),
        record(entry("c")),
        record(entry("t")),
        record(None, key="1:t"),  # compaction tombstone: the version left the index
    ]
    selector = scan_index(records, Selection("global", 2), warnings.append)
    assert selector.chosen() == [("b", 1), ("c", 1)]
    assert warnings == ["moderation.index: skipped 3 malformed record(s) of 7"]


def test_requests_have_deterministic_event_ids_and_are_schema_valid() -> None:
    from modstream.contract import parse

    produced = list(requests([("b", 1)], Selection("global", 2), ts=99))
    assert produced == list(requests([("b", 1)], Selection("global", 2), ts=99))
    key, value = produced[0]
    assert key == "b"
    assert json.loads(value)["event_id"] == "reeval-global-v2-b-1"
    parse("moderation.reevaluate", value)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_pacing_bounds_the_rate() -> None:
    clock = Clock()
    items = list(paced(iter(range(11)), 5.0, sleep=clock.sleep, clock=clock))
    assert items == list(range(11))
    assert abs(clock.now - 2.0) < 1e-9  # 11 items at 5/s: the last one at t = 2 s


def progress_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "modstream.core.progress"]


def test_progress_is_shown_every_interval_and_at_the_end_while_paced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="modstream.core.progress")
    clock = Clock()
    progress = Progress("reevaluate", live=False, clock=clock, every_s=1.0)
    progress.phase("producing", total=11)
    items = list(progress.track(paced(range(11), 5.0, sleep=clock.sleep, clock=clock)))
    assert items == list(range(11))
    # At 5/s: a line once a second (items 6 and 11, at t = 1 s and 2 s), the last one at the end.
    assert progress_lines(caplog) == [
        "reevaluate: producing",
        "reevaluate: producing: 6/11 (54.5%) 6.0/s ETA 0:00:01",
        "reevaluate: producing: 11/11 (100.0%) 5.5/s ETA 0:00:00",
    ]


def fake_broker(monkeypatch: pytest.MonkeyPatch, index: list[ConsumerRecord]) -> list[Any]:
    monkeypatch.setattr(kafkaio, "iter_to_end", lambda servers, topic, **kw: iter(index))
    produced: list[tuple[str, list[Any]]] = []

    def produce(servers: str, topic: str, items: Any) -> int:
        batch = list(items)
        produced.append((topic, batch))
        return len(batch)

    monkeypatch.setattr(kafkaio, "produce", produce)
    return produced


def test_run_selects_from_the_index_produces_in_chunks_and_summarises(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="modstream.core.progress")
    monkeypatch.setattr(reevaluate, "CHUNK", 2)
    index = [record(entry(f"c-{n}")) for n in range(5)] + [
        record(entry("r", human=True)),
        record(b"{broken"),
    ]
    produced = fake_broker(monkeypatch, index)
    said: list[str] = []
    code = reevaluate.run(
        "unused:1",
        Selection("global", 2),
        rate_per_s=1e6,
        ts=99,
        index_topic="p.moderation.index",
        target_topic="p.moderation.reevaluate",
        say=said.append,
        progress_every_s=3600,
    )
    assert code == 0
    assert [topic for topic, _ in produced] == ["p.moderation.reevaluate"] * 3  # 2 + 2 + 1
    keys = [key for _, batch in produced for key, _ in batch]
    assert keys == [f"c-{n}" for n in range(5)]
    assert said[0].startswith("reevaluate: moderation.index: skipped 1 malformed record(s) of 7")
    assert said[1].startswith("reevaluate: 5 content version(s) decided before global v2 (v1: 5)")
    assert "skipped 1 human decision(s)" in said[2]
    assert said[-1].startswith("reevaluate: produced 5 request(s) to p.moderation.reevaluate in")
    shown = progress_lines(caplog)
    assert shown[0] == "reevaluate: reading p.moderation.index"
    assert "reevaluate: producing to p.moderation.reevaluate" in shown
    assert shown[-1].startswith(
        "reevaluate: producing to p.moderation.reevaluate: 5/5 requests (100.0%)"
    )


def test_dry_run_prints_the_count_and_a_sample_and_produces_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    produced = fake_broker(monkeypatch, [record(entry(f"c-{n}")) for n in range(5)])
    said: list[str] = []
    reevaluate.run(
        "unused:1", Selection("global", 2), rate_per_s=1, ts=0, dry_run=True, sample=2,
        say=said.append,
    )  # fmt: skip
    assert produced == []
    assert said[0].startswith("reevaluate: 5 content version(s)")
    assert said[2:] == ["reevaluate:   c-0 v1", "reevaluate:   c-1 v1"]


def test_the_cli_documents_and_passes_every_selection_flag(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from modstream.cli import main as cli

    seen: dict[str, Any] = {}

    def run(bootstrap: str, selection: Selection, **kwargs: Any) -> int:
        seen.update(kwargs, selection=selection)
        return 0

    monkeypatch.setattr(reevaluate, "run", run)
    argv = [
        "reevaluate", "--policy-version", "3", "--since", "5", "--until", "9", "--time",
        "upload", "--surface", "comment", "--region", "EU", "--modality", "video", "--rate",
        "7", "--ts", "11", "--prefix", "p", "--dry-run", "--bootstrap-servers", "b:1",
    ]  # fmt: skip
    assert cli.main(argv) == 0
    assert seen["selection"] == Selection(
        "global", 3, 5, 9, "upload", surface="comment", region="EU", modality="video"
    )
    assert (seen["rate_per_s"], seen["ts"], seen["dry_run"]) == (7.0, 11, True)
    assert seen["index_topic"] == "p.moderation.index"
    assert seen["target_topic"] == "p.moderation.reevaluate"
    with pytest.raises(SystemExit):
        cli.main(["reevaluate", "--policy-version", "3", "--rate", "0"])
    with pytest.raises(SystemExit):
        cli.main(["reevaluate", "--help"])
    text = capsys.readouterr().out
    for flag in ("--since", "--until", "--time", "--surface", "--region", "--modality", "--rate"):
        assert flag in text
    assert "human decisions (sticky)" in text
