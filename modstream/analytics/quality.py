"""Quality of decisions and review wait (issue 29, item 3), read back: from a demo run's topics
for its summary (modstream/demo/summary.py) and from the archive for the report's plots
(modstream/analytics/report.py). The live figures are the moderation job's counters
(modstream/review/quality.py) and the reconciler's gauges (modstream/review/wait.py); both
read-backs count what those count, so a run's summary and report can be held to its metrics.

Definitions (the captions repeat them):
- quality of decisions (as the moderation job counts them, modstream/review/quality.py): appeal rate
=
  appeal tasks / appealable decisions (BLOCK or RESTRICT revisions with an action, not the
  outcome of an appeal: the ones the author was told about and may appeal); overturn rate =
  appeal decisions whose outcome differs from the revision before / appeal decisions;
  disagreement = review decisions, with no human decision before on the version, whose outcome
  differs from the revision before / such reviews; by the decision's policy version;
- review wait: per queue, from a task's `ts` to the `ts` of the first review decision naming
  it (decided tasks), and the age of the oldest task still open at the newest review record;
- second reviews (issue 29 item 2): per queue and reviewer pair, items compared, agreed, and
  Cohen's kappa (modstream/review/agreement.py).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import duckdb
from matplotlib.figure import Figure

from modstream.analytics.report_plots import Plot, new_figure, no_data, rows
from modstream.core import kafkaio
from modstream.core.config import Settings


# The demo summary: this run's records.
def written_at(settings: Settings, topic: str, run_id: str) -> dict[str, int]:
    """task_id -> the Kafka timestamp of this run's review.tasks record (when the moderation
    job wrote it: processing time, unlike the back-dated `ts`)."""
    written: dict[str, int] = {}
    for record in kafkaio.read_to_end(settings.bootstrap_servers, topic):
        text = record.value.decode("utf-8", errors="replace") if record.value else ""
        if run_id not in text:
            continue
        try:
            task_id = json.loads(text)["task_id"]
        except (ValueError, KeyError, TypeError):
            continue  # `mine` warns about it
        written.setdefault(str(task_id), int(record.timestamp))
    return written


def quality_summary(
    decisions: list[dict[str, Any]], notices: list[dict[str, Any]], tasks: list[dict[str, Any]]
) -> dict[str, Any]:
    """What the moderation job's quality counters count (modstream/review/quality.py), from this
    run's records: appealable decisions (notifications that allow an appeal), appeals (appeal
    tasks), appeals decided and overturned, human reviews of the model's decision and the ones that
    disagreed, and the three rates (None when there is nothing to divide by)."""
    revisions: dict[tuple[str, int], dict[int, dict[str, Any]]] = {}
    for decision in decisions:
        version = (decision["content_id"], decision["content_version"])
        revisions.setdefault(version, {})[decision["decision_revision"]] = decision
    counts = Counter[str]()
    for by_revision in revisions.values():
        human = False
        for revision in sorted(by_revision):
            decision, before = by_revision[revision], by_revision.get(revision - 1)
            trigger = decision["trigger"]
            if before is not None and trigger == "appeal":
                counts["appeals_decided"] += 1
                counts["overturned"] += decision["outcome"] != before["outcome"]
            elif before is not None and trigger == "review" and not human:
                counts["human_reviews"] += 1
                counts["disagreed"] += decision["outcome"] != before["outcome"]
            human = human or trigger in ("review", "appeal")
    appealable = len({n["notification_id"] for n in notices if n.get("appeal_allowed")})
    appeals = len({t["task_id"] for t in tasks if t["kind"] == "appeal"})
    return {
        "appealable": appealable,
        "appeals": appeals,
        "appeals_decided": counts["appeals_decided"],
        "overturned": counts["overturned"],
        "human_reviews": counts["human_reviews"],
        "disagreed": counts["disagreed"],
        "appeal_rate": _rate(appeals, appealable),
        "overturn_rate": _rate(counts["overturned"], counts["appeals_decided"]),
        "disagreement_rate": _rate(counts["disagreed"], counts["human_reviews"]),
    }


def _rate(part: int, whole: int) -> float | None:
    """`part` / `whole`, None when there is nothing to divide by."""
    return part / whole if whole else None


def review_wait_summary(
    tasks: list[dict[str, Any]],
    reviews: list[dict[str, Any]],
    written: dict[str, int],
    now_ms: int,
) -> dict[str, dict[str, int]]:
    """Per queue: its tasks, those still open (no review decision names them) and the oldest
    open one's wait since the moderation job wrote it (0 when none is open), as the
    reconciler's `oldest_review_wait_ms` gauge measures it (to its read of the task)."""
    decided = {review["task_id"] for review in reviews}
    queues: dict[str, dict[str, int]] = {}
    for task in {t["task_id"]: t for t in tasks}.values():
        queue = queues.setdefault(task["queue"], {"tasks": 0, "open": 0, "oldest_wait_ms": 0})
        queue["tasks"] += 1
        if task["task_id"] in decided:
            continue
        queue["open"] += 1
        at = written.get(task["task_id"])
        if at is not None:
            queue["oldest_wait_ms"] = max(queue["oldest_wait_ms"], max(0, now_ms - at))
    return dict(sorted(queues.items()))


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The demo summary's rows for `quality` and `review_wait`."""
    counted, waits = summary["quality"], summary["review_wait"]
    shown = [f"{q} {w['open']}/{w['tasks']} {w['oldest_wait_ms']} ms" for q, w in waits.items()]
    return [
        f"  appeals / appealable          {counted['appeals']} / {counted['appealable']} "
        f"({_percent(counted['appeal_rate'])}); overturned {counted['overturned']} of "
        f"{counted['appeals_decided']} decided ({_percent(counted['overturn_rate'])})",
        f"  human reviews of the model    {counted['human_reviews']}, disagreeing "
        f"{counted['disagreed']} ({_percent(counted['disagreement_rate'])})",
        "  review wait (open/tasks, oldest) " + (", ".join(shown) or "no tasks"),
        "  second reviews (agreed/compared, kappa) "
        + (", ".join(_agreement(row) for row in summary.get("second_reviews", [])) or "none"),
    ]


def _agreement(row: dict[str, Any]) -> str:
    kappa = "n/a" if row["kappa"] is None else f"{row['kappa']:.2f}"
    return f"{row['queue']} {row['pair']} {row['agreed']}/{row['items']} {kappa}"


def _percent(rate: float | None) -> str:
    return "n/a" if rate is None else f"{100 * rate:.1f}%"


# The report: the archive's views.
_JUDGED = """
    WITH d AS (SELECT DISTINCT content_id, content_version, decision_revision, outcome,
                      trigger, policy_version FROM decisions),
        r AS (SELECT *,
                     lag(outcome) OVER v AS before,
                     coalesce(bool_or(trigger IN ('review', 'appeal')) OVER (v ROWS BETWEEN
                              UNBOUNDED PRECEDING AND 1 PRECEDING), false) AS human_before
              FROM d WINDOW v AS (PARTITION BY content_id, content_version
                                  ORDER BY decision_revision)),
        acted AS (SELECT DISTINCT content_id, content_version, decision_revision FROM actions)
    SELECT r.policy_version,
           count(*) FILTER (WHERE r.outcome IN ('BLOCK', 'RESTRICT')
                            AND r.trigger NOT IN ('appeal', 'delete')
                            AND a.decision_revision IS NOT NULL) AS appealable,
           count(*) FILTER (WHERE r.trigger = 'appeal' AND r.before IS NOT NULL) AS appealed,
           count(*) FILTER (WHERE r.trigger = 'appeal' AND r.outcome <> r.before) AS overturned,
           count(*) FILTER (WHERE r.trigger = 'review' AND r.before IS NOT NULL
                            AND NOT r.human_before) AS reviewed,
           count(*) FILTER (WHERE r.trigger = 'review' AND NOT r.human_before
                            AND r.outcome <> r.before) AS disagreed
    FROM r LEFT JOIN acted a USING (content_id, content_version, decision_revision)
    GROUP BY r.policy_version ORDER BY r.policy_version"""


def quality_by_version(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Per policy version: appealable decisions, appeals opened, appeals decided and overturned,
    reviews of the model's decision and those that disagreed, and the three rates (None when
    nothing to divide by)."""
    judged = {row["policy_version"]: row for row in rows(con, _JUDGED)}
    appeals = rows(
        con,
        """SELECT policy_version, count(DISTINCT task_id) AS appeals FROM review_tasks
           WHERE kind = 'appeal' GROUP BY ALL""",
    )
    for row in appeals:
        judged.setdefault(row["policy_version"], {"policy_version": row["policy_version"]})
        judged[row["policy_version"]]["appeals"] = row["appeals"]
    found = []
    for version in sorted(judged):
        row = {"appealable": 0, "appealed": 0, "overturned": 0, "reviewed": 0, "disagreed": 0,
               "appeals": 0, **judged[version]}  # fmt: skip
        row["appeal_rate"] = _rate(row["appeals"], row["appealable"])
        row["overturn_rate"] = _rate(row["overturned"], row["appealed"])
        row["disagreement_rate"] = _rate(row["disagreed"], row["reviewed"])
        found.append(row)
    return found


def quality_of_decisions(con: duckdb.DuckDBPyConnection) -> Figure:
    figure, axes = new_figure()
    found = [
        row
        for row in quality_by_version(con)
        if any(row[rate] is not None for rate in ("appeal_rate", "overturn_rate"))
        or row["disagreement_rate"] is not None
    ]
    if not found:
        no_data(axes, "no data (no appealable decision, appeal or review)")
        return figure
    x = range(len(found))
    series = (
        ("appeal_rate", "appeals", "appeal rate", "#2980b9"),
        ("overturn_rate", "overturned", "overturn rate", "#c0392b"),
        ("disagreement_rate", "disagreed", "model-human disagreement", "#8e44ad"),
    )
    for offset, (rate, count, label, color) in enumerate(series):
        values = [100 * (row[rate] or 0.0) for row in found]
        bars = axes.bar([i + (offset - 1) * 0.27 for i in x], values, width=0.27, label=label,
                        color=color)  # fmt: skip
        axes.bar_label(bars, labels=[str(row[count]) for row in found], fontsize=8)
    axes.set_xticks(list(x), [f"v{row['policy_version']}" for row in found])
    axes.set_ylabel("% (bar label: count)")
    axes.set_xlabel("policy version")
    axes.legend(fontsize=8)
    return figure


def review_waits(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Per queue: the decided tasks' waits (ms, sorted) and the oldest open task's age (ms) at
    the newest review record's ts (None when none is open)."""
    found = rows(
        con,
        """
        WITH t AS (SELECT task_id, any_value(queue) AS queue, min(ts) AS opened
                   FROM review_tasks GROUP BY task_id),
            d AS (SELECT task_id, min(ts) AS decided FROM review_decisions GROUP BY task_id),
            newest AS (SELECT greatest((SELECT max(ts) FROM review_tasks),
                                       (SELECT max(ts) FROM review_decisions)) AS newest_ts)
        SELECT t.queue,
               list(d.decided - t.opened ORDER BY d.decided - t.opened)
                   FILTER (WHERE d.decided IS NOT NULL) AS waits,
               max(newest.newest_ts - t.opened) FILTER (WHERE d.decided IS NULL) AS oldest_open
        FROM t LEFT JOIN d USING (task_id) CROSS JOIN newest
        GROUP BY t.queue ORDER BY t.queue""",
    )
    return [{**row, "waits": [max(0, w) for w in row["waits"] or []]} for row in found]


def review_wait(con: duckdb.DuckDBPyConnection) -> Figure:
    figure, axes = new_figure()
    found = review_waits(con)
    if not found:
        no_data(axes, "no data (no review tasks)")
        return figure
    x = range(len(found))
    series = (
        ("p50 decided", lambda row: _quantile(row["waits"], 0.5), "#27ae60"),
        ("p99 decided", lambda row: _quantile(row["waits"], 0.99), "#f39c12"),
        ("oldest open", lambda row: row["oldest_open"] or 0, "#c0392b"),
    )
    for offset, (label, value, color) in enumerate(series):
        hours = [value(row) / 3_600_000 for row in found]
        bars = axes.bar([i + (offset - 1) * 0.27 for i in x], hours, width=0.27, label=label,
                        color=color)  # fmt: skip
        axes.bar_label(bars, labels=[f"{h:.1f}" for h in hours], fontsize=7)
    axes.set_xticks(list(x), [row["queue"] for row in found])
    axes.set_ylabel("hours")
    axes.set_xlabel("queue")
    axes.legend(fontsize=8)
    return figure


def _quantile(ordered: list[int], fraction: float) -> int:
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0


# title, plot, caption: after report_plots.PLOTS in the report.
PLOTS: tuple[tuple[str, Plot, str], ...] = (
    (
        "Appeals, overturns and model-human disagreement by policy version",
        quality_of_decisions,
        "Appeal rate: appeal tasks / appealable decisions (BLOCK or RESTRICT revisions with an "
        "action, not the outcome of an appeal). Overturn rate: appeal decisions whose outcome "
        "differs from the revision before / appeal decisions. Disagreement: reviews of a "
        "model's decision (no human decision before) with another outcome / such reviews. "
        "Bar labels: the counts (appeals, overturned, disagreed).",
    ),
    (
        "Review wait by queue",
        review_wait,
        "Per queue: p50 and p99 from a review task's ts to the ts of the first review decision "
        "naming it, and the oldest task still open at the newest review record (event time; "
        "the live gauge oldest_review_wait_ms counts from when the reconciler read the task).",
    ),
)
