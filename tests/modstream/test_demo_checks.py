"""What a demo run must reach (modstream/demo/checks.py), without the stack: every scanned
upload answered by each required detector (the model after its gate too), and no version still
`scanning` long after its deadline, which the demo's success check now reports."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from modstream.analytics import quality
from modstream.demo import checks as demo_checks
from modstream.demo import summary as demo_summary
from modstream.review import agreement

POLICY = {
    "detectors": {
        "text": {"required": ["offensive_text"], "deadline_ms": 5_000},
        "image": {
            "required": ["media_check", "nsfw_image"],
            "gate": ["media_check"],
            "deadline_ms": 30_000,
        },
        "video": {"required": ["media_check", "nsfw_image"], "deadline_ms": 120_000},
    }
}
T0 = 1_796_179_284_699


def upload(content_id: str, modality: str, ts: int = T0) -> dict[str, Any]:
    value = {"type": "upsert", "content_id": content_id, "content_version": 1, "ts": ts}
    return {"topic": "content.versions", "value": {**value, "modality": modality}}


def result(content_id: str, detector: str, status: str = "ok") -> dict[str, Any]:
    return {"content_id": content_id, "content_version": 1, "detector": detector, "status": status}


def decision(content_id: str, state: str, ts: int = T0) -> dict[str, Any]:
    return {"content_id": content_id, "content_version": 1, "state": state, "ts": ts}


LINES = [
    upload("r-img", "image"),
    upload("r-txt", "text"),
    upload("r-vid", "video"),  # generated evidence: not scanned
    {"topic": "content.versions", "value": {"type": "upsert", "modality": "image"}},  # malformed
]


def test_the_model_after_a_gate_is_expected_not_only_the_gate() -> None:
    expected = demo_checks.expected_scans(LINES, POLICY, {"r-img", "r-txt"})
    assert expected == {
        ("r-img", 1, "media_check"),
        ("r-img", 1, "nsfw_image"),
        ("r-txt", 1, "offensive_text"),
    }


def test_a_gate_result_alone_leaves_the_model_unanswered() -> None:
    # The bug's run: every image had its media_check result when the demo stopped waiting.
    expected = demo_checks.expected_scans(LINES, POLICY, {"r-img", "r-txt"})
    results = [result("r-img", "media_check"), result("r-txt", "offensive_text")]
    assert demo_checks.unanswered(expected, results) == {("r-img", 1, "nsfw_image")}
    results.append(result("r-img", "nsfw_image", status="timeout"))  # an answer, if unknown
    assert demo_checks.unanswered(expected, results) == set()


def test_a_version_that_no_longer_waits_for_evidence_is_not_waited_for() -> None:
    """A deleted image (or one a bank match blocked, or whose gate failed) never asks its
    model: the wait must not run to its timeout for it."""
    expected = demo_checks.expected_scans(LINES, POLICY, {"r-img", "r-txt"})
    results = [result("r-img", "media_check"), result("r-txt", "offensive_text")]
    decisions = [
        {**decision("r-img", "scanning"), "decision_revision": 1},
        {**decision("r-img", "deleted"), "decision_revision": 2},
        {**decision("r-txt", "scanning"), "decision_revision": 1},
    ]
    done = demo_checks.settled(decisions)
    assert done == {("r-img", 1)}
    assert demo_checks.unanswered(expected, results, done) == set()
    assert demo_checks.unanswered(expected, results[:1], done) == {("r-txt", 1, "offensive_text")}


@pytest.mark.parametrize(
    ("state", "reached", "overdue"),
    [
        ("scanning", T0 + 178_000, True),  # the reported run: 178 s past a 30 s deadline
        ("scanning", T0 + 2 * 30_000 + 5_000, False),  # a deadline may still be waiting
        ("scanning", T0 + 2 * 30_000 + 5_001, True),
        ("approved", T0 + 178_000, False),  # its evidence decided it
        ("expired", T0 + 178_000, False),  # its deadline decided it
    ],
)
def test_a_version_still_scanning_long_after_its_deadline_is_overdue(
    state: str, reached: int, overdue: bool
) -> None:
    latest = {("r-img", 1): decision("r-img", state)}
    found = demo_checks.overdue(latest, LINES, POLICY, reached)
    assert found == ([("r-img", 1)] if overdue else [])


def test_each_modality_has_its_own_deadline() -> None:
    latest = {(c, 1): decision(c, "scanning") for c in ("r-img", "r-txt", "r-vid")}
    reached = T0 + 178_000  # past text's and image's waits, not video's (2 x 120 s + 5 s)
    assert demo_checks.overdue(latest, LINES, POLICY, reached) == [("r-img", 1), ("r-txt", 1)]


def results(**changes: Any) -> demo_summary.Results:
    fields = {
        "decisions": [],
        "latest": {("r-img", 1): decision("r-img", "approved")},
        "actions": [],
        "tasks": [],
        "shadows": [],
        "letters": [],
        "discrepancies": [],
        "sanctions": [],
        "notices": [],
        "saved": {"required": 0, "models": 0, "checks": 0},
        "mismatched": set(),
        "overdue": [],
        "applied": 0,
        "lags": [],
        "exposures": [],
    }
    return demo_summary.Results(**{**fields, **changes})


def test_the_demo_fails_when_a_version_is_left_scanning() -> None:
    fine = results()
    summary = demo_summary.summarize(fine, started=0.0)
    assert summary["overdue_scanning"] == 0
    assert demo_summary.succeeded(fine, summary)
    stuck = dataclasses.replace(fine, overdue=[("r-img", 1)])
    summary = demo_summary.summarize(stuck, started=0.0)
    assert summary["overdue_scanning"] == 1
    assert not demo_summary.succeeded(stuck, summary)


def test_the_summary_gives_the_exposure_window_p50_and_p99_once_per_version() -> None:
    def window(content_id: str, exposure_ms: int, trigger: str) -> dict[str, Any]:
        return {"content_id": content_id, "content_version": 1, "exposure_ms": exposure_ms,
                "trigger": trigger}  # fmt: skip

    exposures = [window(f"c-{n}", 1_000 * n, "review") for n in range(1, 100)]
    exposures += [window("c-100", 500_000, "evidence"), window("c-100", 500_000, "evidence")]
    summary = demo_summary.summarize(results(exposures=exposures), started=0.0)
    assert summary["exposure_ms"] == {
        "p50": 51_000,
        "p99": 500_000,
        "measured": 100,
        "by_trigger": {"evidence": 1, "review": 99},
    }
    assert demo_summary.summarize(results(), started=0.0)["exposure_ms"]["measured"] == 0


def test_the_printed_summary_has_the_exposure_window_row(
    capsys: pytest.CaptureFixture[str],
) -> None:
    exposures = [{"content_id": "c-1", "content_version": 1, "exposure_ms": 1_500,
                  "trigger": "report"}]  # fmt: skip
    fine = results(exposures=exposures, latest={})
    summary = demo_summary.summarize(fine, started=0.0)
    demo_summary.print_summary(
        fine, summary, run_id="demo1-", seed=7, shadow_version=2, retro_bank=None, started=0.0
    )
    assert "exposure window               p50 1500 ms, p99 1500 ms (1 versions" in (
        capsys.readouterr().out
    )


def test_the_summary_counts_appeals_overturns_and_disagreements_as_the_job_does() -> None:
    def revision(content_id: str, number: int, outcome: str, trigger: str) -> dict[str, Any]:
        return {"content_id": content_id, "content_version": 1, "decision_revision": number,
                "outcome": outcome, "trigger": trigger}  # fmt: skip

    decisions = [
        revision("a", 1, "BLOCK", "fast_gate"),
        revision("a", 2, "ALLOW", "appeal"),  # overturned
        revision("b", 1, "BLOCK", "evidence"),
        revision("b", 2, "BLOCK", "appeal"),  # upheld
        revision("c", 1, "ALLOW", "fast_gate"),
        revision("c", 2, "BLOCK", "review"),  # disagrees with the model
        revision("c", 3, "ALLOW", "review"),  # a human reviewed again: not counted
        revision("d", 2, "ALLOW", "review"),  # nothing before it in this run: not counted
    ]
    notices = [{"notification_id": f"n-{n}", "appeal_allowed": n < 4} for n in range(6)] + [
        {"notification_id": "n-0", "appeal_allowed": True}
    ]  # seen twice: once
    tasks = [{"task_id": "t-a", "kind": "appeal", "queue": "appeals"},
             {"task_id": "t-b", "kind": "appeal", "queue": "appeals"},
             {"task_id": "t-r", "kind": "review", "queue": "text"}]  # fmt: skip
    counted = quality.quality_summary(decisions, notices, tasks)
    assert counted == {
        "appealable": 4,
        "appeals": 2,
        "appeals_decided": 2,
        "overturned": 1,
        "human_reviews": 1,
        "disagreed": 1,
        "appeal_rate": 0.5,
        "overturn_rate": 0.5,
        "disagreement_rate": 1.0,
    }
    assert quality.quality_summary([], [], [])["appeal_rate"] is None


def test_the_summary_gives_each_queues_open_tasks_and_the_oldest_wait() -> None:
    tasks = [{"task_id": "t-1", "kind": "appeal", "queue": "appeals", "content_id": "c-1"},
             {"task_id": "t-2", "kind": "appeal", "queue": "appeals", "content_id": "c-2"},
             {"task_id": "t-3", "kind": "review", "queue": "text", "content_id": "c-3"},
             {"task_id": "t-3", "kind": "review", "queue": "text",
              "content_id": "c-3"}]  # fmt: skip
    for task in tasks:  # the fields the cost summary reads too (contract: review.tasks)
        task.update(content_version=1, ts=1_000)
    reviews = [{"task_id": "t-1", "ts": 5_000}, {"task_id": "t-3", "ts": 6_000}]
    written = {"t-1": 1_000, "t-2": 4_000, "t-3": 2_000}
    assert quality.review_wait_summary(tasks, reviews, written, 10_000) == {
        "appeals": {"tasks": 2, "open": 1, "oldest_wait_ms": 6_000},
        "text": {"tasks": 1, "open": 0, "oldest_wait_ms": 0},
    }
    summary = demo_summary.summarize(results(tasks=tasks, reviews=reviews), started=0.0)
    assert summary["review_wait"]["appeals"]["open"] == 1 and "quality" in summary
    lines = quality.summary_lines(summary)
    assert "appeals / appealable          2 / 0 (n/a)" in lines[0]
    assert lines[2].endswith("appeals 1/2 0 ms, text 0/1 0 ms")  # no write times given


def test_the_summary_gives_score_drift_and_cost_per_workflow_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 29 items 4 and 5: PSI of each detector's scores, the run's last window against
    the ones before it (here a shift to high scores in its last quarter), and the cost per
    decision by policy and workflow version."""
    evidence = [
        {"event_id": f"e{n}", "content_id": f"c-{n}", "content_version": 1,
         "detector": "offensive_text", "model_version": "m1", "status": "ok", "ts": T0 + n,
         "scores": {"offensive": 0.05 if n < 75 else 0.95}, "inference_ms": 4}
        for n in range(100)
    ]  # fmt: skip
    decisions = [{**decision(f"c-{n}", "approved"), "content_version": 1, "decision_revision": 1,
                  "trigger": "evidence", "policy_version": 3, "workflow_version": 2}
                 for n in range(100)]  # fmt: skip
    run = results(evidence=evidence, decisions=decisions, latest={})
    summary = demo_summary.summarize(run, started=0.0)
    assert list(summary["score_drift"]) == ["offensive_text offensive m1"]
    drifted = summary["score_drift"]["offensive_text offensive m1"]
    assert drifted["psi"] > 0.2 and drifted["scores"] == 25
    assert drifted["noise"] == pytest.approx(9 * (1 / 75 + 1 / 25), abs=1e-4)
    [row] = summary["cost_per_decision"]
    assert (row["policy_version"], row["workflow_version"], row["decisions"]) == (3, 2, 100)
    assert row["per_decision"] == {
        "detector_calls": 1, "inference_ms": 4, "review_minutes": 0, "reevaluations": 0,
    }  # fmt: skip
    demo_summary.print_summary(
        run, summary, run_id="demo1-", seed=7, shadow_version=2, retro_bank=None, started=0.0
    )
    printed = capsys.readouterr().out
    assert "score drift (PSI, last window) offensive_text offensive m1 " in printed
    assert "(chance 0.480)" in printed
    assert "cost per decision (policy v3, workflow v2) 100 decisions: 1.0 detector calls" in printed


def test_the_summary_gives_second_review_agreement_per_queue_and_pair() -> None:
    """Issue 29 item 2: each second-review task pairs the first review of the task it names
    with its own first review by another reviewer (the first reviewer's own is not one)."""
    tasks = [
        {"task_id": "t-1", "queue": "adult", "content_id": "c-1"},
        {"task_id": "s-1", "queue": "second_review", "content_id": "c-1",
         "second_review": {"round": "second", "of_task": "t-1", "sampled": False}},
        {"task_id": "t-2", "queue": "adult", "content_id": "c-2"},
        {"task_id": "s-2", "queue": "second_review", "content_id": "c-2",
         "second_review": {"round": "second", "of_task": "t-2", "sampled": True}},
        {"task_id": "s-3", "queue": "second_review", "content_id": "c-3",
         "second_review": {"round": "second", "of_task": "t-3", "sampled": True}},
    ]  # fmt: skip
    for task in tasks:  # the fields the other summaries read (contract: review.tasks)
        task.update(kind="review", content_version=1, ts=1_000)

    def review(content_id: str, task_id: str, reviewer: str, outcome: str, ts: int) -> dict:
        return {
            "event_id": f"{task_id}-{reviewer}",
            "content_id": content_id,
            "task_id": task_id,
            "reviewer_id": reviewer,
            "outcome": outcome,
            "ts": ts,
        }

    reviews = [
        review("c-1", "t-1", "r2", "BLOCK", 1),
        review("c-1", "s-1", "r2", "BLOCK", 2),  # refused: the first reviewer again
        review("c-1", "s-1", "r1", "BLOCK", 3),
        review("c-2", "t-2", "r1", "ALLOW", 1),
        review("c-2", "s-2", "r2", "BLOCK", 2),
        review("c-3", "t-3", "r1", "ALLOW", 1),  # its second never came
    ]
    [row] = agreement.second_review_summary(tasks, reviews)
    # Pair r1,r2: (r1 BLOCK, r2 BLOCK) and (r1 ALLOW, r2 BLOCK): p_o 0.5, p_e 0.5, kappa 0.
    assert row == {"queue": "adult", "pair": "r1,r2", "items": 2, "agreed": 1, "kappa": 0.0}
    assert agreement.second_review_summary(tasks[:1], reviews) == []
    summary = demo_summary.summarize(results(tasks=tasks, reviews=reviews), started=0.0)
    assert summary["second_reviews"] == [row]
    assert quality.summary_lines(summary)[-1].endswith("adult r1,r2 1/2 0.00")
