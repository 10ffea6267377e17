"""`modstream report`: one self-contained HTML file, its plots embedded, "no data" rather than
a failure where the archive has nothing for a plot."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from modstream.analytics import archive_schema, quality, report, report_plots
from modstream.analytics import streams as analytics
from modstream.testing import archive as archive_data

IMAGE = re.compile(r'<img alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)">')


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("archive")
    archive_data.build(where)
    return where


def _said(figure: object) -> list[str]:
    return [text.get_text() for axes in figure.axes for text in axes.texts]  # type: ignore[attr-defined]


def test_the_report_is_one_html_file_with_every_plot_embedded(root: Path, tmp_path: Path) -> None:
    out = report.write(None, "demo123abc", tmp_path / "deep" / "report.html", root=root)
    page = out.read_text(encoding="utf-8")
    images = IMAGE.findall(page)
    assert len(images) == len(report.PLOTS) >= 5
    assert all(len(image) > 2_000 for image in images)  # PNGs, not empty placeholders
    assert not re.search(r'(src|href)="(?!data:)', page)  # nothing to fetch from anywhere
    assert "<h1>modstream report: demo123abc</h1>" in page
    assert f"<td>decisions</td><td>{len(archive_data.records()['moderation.decisions'])}</td>" in (
        page
    )
    for title, _, caption in report.PLOTS:
        assert f"<h2>{title}</h2>" in page
        assert caption.replace("'", "&#x27;") in page


def test_a_report_of_an_empty_archive_is_written_with_no_data_plots(tmp_path: Path) -> None:
    out = report.write(None, None, tmp_path / "report.html", root=tmp_path / "empty")
    page = out.read_text(encoding="utf-8")
    assert len(IMAGE.findall(page)) == len(report.PLOTS)
    assert "<p>no data</p>" in page
    con = analytics.connect(root=tmp_path / "empty")
    for _, plot, _ in report.PLOTS:
        assert any(text.startswith("no data") for text in _said(plot(con))), plot.__name__


def test_the_plots_with_data_draw_and_say_no_no_data(root: Path) -> None:
    con = analytics.connect(root=root)
    for _, plot, _ in report.PLOTS:
        figure = plot(con)
        assert not any(text.startswith("no data") for text in _said(figure)), plot.__name__
        assert figure.axes[0].patches or figure.axes[0].lines, plot.__name__


def test_the_enforcement_lag_is_from_decision_written_to_revision_served(root: Path) -> None:
    lags = report_plots.enforcement_lags(analytics.connect(root=root))
    assert len(lags) == len(archive_data.records()["moderation.actions"])
    assert set(lags) == {200.0 + 100 * step for step in range(7)}  # archive_data.visibility


@pytest.mark.parametrize(
    ("span_ms", "width_s"),
    [(0, 1), (40_000, 1), (41_000, 5), (3_600_000, 300), (86_400_000, 3600), (10**13, 604_800)],
)
def test_time_buckets_are_round_and_at_most_forty(span_ms: int, width_s: int) -> None:
    assert report_plots.bucket_s(span_ms) == width_s


def test_the_exposure_window_is_read_once_per_version_from_the_exposure_table(
    root: Path,
) -> None:
    windows = report_plots.exposure_windows(analytics.connect(root=root))
    expected = archive_data.records()["enforcement.exposure"]
    assert expected  # archive_data measures some through modstream/moderation/exposure.py
    assert sorted(w["exposure_ms"] for w in windows) == sorted(
        float(e["exposure_ms"]) for e in expected
    )
    assert {w["trigger"] for w in windows} == {e["trigger"] for e in expected}


def test_the_quality_figures_count_what_the_moderation_job_counts(root: Path) -> None:
    """The archive's appealable decisions, appeals and overturns, computed again from the
    records: BLOCK or RESTRICT revisions with an action (not an appeal's outcome, not a delete),
    appeal tasks, and appeal decisions whose outcome differs from the revision before."""
    found = archive_data.records()
    acted = {
        (a["content_id"], a["content_version"], a["decision_revision"])
        for a in found["moderation.actions"]
    }
    decisions = {
        (d["content_id"], d["content_version"], d["decision_revision"]): d
        for d in found["moderation.decisions"]
    }
    appealable = sum(
        1
        for key, d in decisions.items()
        if d["outcome"] in ("BLOCK", "RESTRICT")
        and d["trigger"] not in ("appeal", "delete")
        and key in acted
    )
    appeals = [d for d in decisions.values() if d["trigger"] == "appeal"]
    overturned = sum(
        1
        for d in appeals
        if decisions[(d["content_id"], d["content_version"], d["decision_revision"] - 1)]["outcome"]
        != d["outcome"]
    )
    tasks = {t["task_id"] for t in found["review.tasks"] if t["kind"] == "appeal"}
    (version,) = quality.quality_by_version(analytics.connect(root=root))
    assert (version["appealable"], version["appeals"]) == (appealable, len(tasks))
    assert (version["appealed"], version["overturned"]) == (len(appeals), overturned) == (1, 1)
    assert version["appeal_rate"] == len(tasks) / appealable
    waits = {row["queue"]: row for row in quality.review_waits(analytics.connect(root=root))}
    assert waits["appeals"]["waits"] and waits["appeals"]["oldest_open"] is None


def test_second_reviews_give_agreement_and_kappa_per_queue_and_pair(tmp_path: Path) -> None:
    """Issue 29 item 2: two second-review tasks of queue adult, reviewed by the pair r1,r2 (one
    agreeing, one not: kappa 0 by hand, p_o = p_e = 0.5), in the report's table."""
    from modstream.analytics.archive_store import Archiver, load_manifest

    def task(content_id: str, task_id: str, queue: str, of_task: str | None) -> dict[str, Any]:
        record: dict[str, Any] = {
            "task_id": task_id, "kind": "review", "content_id": content_id,
            "content_version": 1, "decision_revision": 1, "policy_version": 1, "queue": queue,
            "priority": 1, "reasons": ["x"], "evidence": [], "ts": 1_000,
        }  # fmt: skip
        if of_task is not None:
            record["second_review"] = {"round": "second", "of_task": of_task, "sampled": True}
        return record

    def review(content_id: str, task_id: str, reviewer: str, outcome: str, ts: int) -> dict:
        return {
            "event_id": f"{content_id}-{task_id}-{reviewer}", "task_id": task_id,
            "content_id": content_id, "content_version": 1, "reviewer_id": reviewer,
            "outcome": outcome, "reason": "x", "ts": ts,
        }  # fmt: skip

    found = {
        "review.tasks": [
            task("c-1", "t-1", "adult", None), task("c-1", "s-1", "second_review", "t-1"),
            task("c-2", "t-2", "adult", None), task("c-2", "s-2", "second_review", "t-2"),
        ],
        "review.decisions": [
            review("c-1", "t-1", "r1", "BLOCK", 2_000), review("c-1", "s-1", "r2", "BLOCK", 3_000),
            review("c-2", "t-2", "r2", "ALLOW", 2_000), review("c-2", "s-2", "r1", "BLOCK", 3_000),
        ],
    }  # fmt: skip
    archiver = Archiver(tmp_path, load_manifest(tmp_path))
    for topic, values in found.items():
        offsets: dict[int, int] = {}
        archive_data.feed(archiver, topic, values, offsets)
        table = next(t for t in archive_schema.TABLES.values() if t.topic == topic)
        archiver.flush({(table.name, p): offset for p, offset in offsets.items()})
    con = analytics.connect(root=tmp_path)
    # r1,r2: (BLOCK, BLOCK) and, named in order, (r1 BLOCK, r2 ALLOW): kappa 0.
    assert report.second_reviews(con) == [["adult", "r1,r2", 2, 1, "0.00"]]
    assert report.second_reviews(analytics.connect(root=tmp_path / "empty")) == []
