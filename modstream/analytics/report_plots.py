"""The report's plots: each one SQL query over the archive's views (modstream/analytics/streams.py)
and one matplotlib Figure, drawn without pyplot (no global state, Agg for PNG). A plot whose
query returns nothing says "no data" instead of failing: a young deployment has no shadow
policy or no reviews yet, and its report must still be written.

Definitions (the captions repeat them):
- a content version's outcome is that of its latest decision revision (per policy version
  where the plot is by version);
- enforcement lag: from the decision's Kafka timestamp (when the moderation job wrote it) to
  the `ts` of the first content.visibility record that shows its revision (when the Content
  Service served it), for revisions that had an action; both are processing time, so the lag
  is what users waited, not event time;
- exposure window: per content version shown (`public` or `limited`) and later restricted by
  a BLOCK or RESTRICT, the time from its first showing to the restriction taking effect, both
  the `ts` of content.visibility records (the archive's `exposure` table, written by the
  reconciler: docs/enforcement.md, "Exposure window");
- unknown rate: of the latest decisions that name a detector (in `evidence` or in
  `completeness.unknown`), the share that name it unknown;
- score drift: the population-stability index of each detector's `ok` scores per model
  version and score label, ten fixed buckets of [0, 1], each window against the windows before
  it (modstream/scanning/drift.py: an hour against the day before, as the alert, once the archive
  holds more than a day; a younger one in four windows, each against all before it).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import duckdb
from matplotlib.figure import Figure

from modstream.contract.common import OUTCOME_SEVERITY
from modstream.scanning import drift

Plot = Callable[[duckdb.DuckDBPyConnection], Figure]
COLORS = {
    "BLOCK": "#c0392b",
    "PENDING": "#e67e22",
    "RESTRICT": "#f1c40f",
    "PROVISIONAL_ALLOW": "#5dade2",
    "ALLOW": "#27ae60",
}
_BUCKETS_S = (1, 5, 10, 30, 60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400)


def new_figure(height: float = 3.4) -> tuple[Figure, Any]:
    figure = Figure(figsize=(8.5, height), layout="constrained")
    return figure, figure.subplots()


def no_data(axes: Any, why: str = "no data") -> None:
    axes.text(
        0.5, 0.5, why, ha="center", va="center", fontsize=14, color="#777", transform=axes.transAxes
    )
    axes.set_axis_off()


def rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    result = con.sql(sql)
    return [] if result is None else result.to_arrow_table().to_pylist()


def bucket_s(span_ms: int, most: int = 40) -> int:
    """The smallest of a few round widths that cuts `span_ms` into at most `most` buckets."""
    return next((b for b in _BUCKETS_S if span_ms / (b * 1000) <= most), _BUCKETS_S[-1])


def outcomes_over_time(con: duckdb.DuckDBPyConnection) -> Figure:
    """Revisions per time bucket and outcome, over the middle 98% of event time: a few records
    stamped far from the rest (a back-dated test record) would squeeze the rest into one bar."""
    figure, axes = new_figure()
    span = rows(
        con,
        "SELECT quantile_disc(ts, 0.01) AS lo, quantile_disc(ts, 0.99) AS hi, "
        "count(*) AS total FROM decisions",
    )[0]
    if span["lo"] is None:
        no_data(axes)
        return figure
    width = bucket_s(span["hi"] - span["lo"]) * 1000
    lo, hi = span["lo"] // width * width, span["hi"] // width * width + width
    counts = rows(
        con,
        f"SELECT ts // {width} * {width} AS bucket, outcome, count(*) AS n FROM decisions "
        f"WHERE ts >= {lo} AND ts < {hi} GROUP BY ALL ORDER BY bucket",
    )
    _stack_outcomes(axes, counts, width)
    outside = span["total"] - sum(row["n"] for row in counts)
    axes.set_ylabel(f"decision revisions per {width // 1000}s")
    axes.set_xlabel(
        "event time (UTC)" + (f"; {outside} revision(s) outside this range" if outside else "")
    )
    axes.legend(fontsize=8, ncols=5, loc="upper left")
    return figure


def _stack_outcomes(axes: Any, counts: list[dict[str, Any]], width: int) -> None:
    times = sorted({row["bucket"] for row in counts})
    x = [datetime.datetime.fromtimestamp(t / 1000, tz=datetime.UTC) for t in times]
    bottom = [0] * len(times)
    for outcome in reversed(OUTCOME_SEVERITY):
        n = {row["bucket"]: row["n"] for row in counts if row["outcome"] == outcome}
        heights = [n.get(t, 0) for t in times]
        if any(heights):
            axes.bar(
                x,
                heights,
                width=width / 86_400_000 * 0.9,
                bottom=bottom,
                label=outcome,
                color=COLORS[outcome],
                align="edge",
            )
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]


_LATEST = """SELECT policy_version, content_id, content_version,
    arg_max(outcome, decision_revision) AS outcome FROM {table} GROUP BY ALL"""


def block_rate_by_version(con: duckdb.DuckDBPyConnection) -> Figure:
    figure, axes = new_figure()
    found = rows(
        con,
        f"""
        SELECT policy_version, kind, count(*) AS n, avg((outcome = 'BLOCK')::INT) AS rate FROM (
            SELECT *, 'active' AS kind FROM ({_LATEST.format(table="decisions")})
            UNION ALL SELECT *, 'shadow' AS kind FROM ({_LATEST.format(table="shadow")})
        ) GROUP BY ALL ORDER BY policy_version, kind""",
    )
    if not found:
        no_data(axes)
        return figure
    labels = [
        f"v{r['policy_version']}" + (" (shadow)" if r["kind"] == "shadow" else "") for r in found
    ]
    colors = ["#7f8c8d" if r["kind"] == "shadow" else COLORS["BLOCK"] for r in found]
    bars = axes.bar(labels, [100 * r["rate"] for r in found], color=colors)
    axes.bar_label(bars, labels=[f"{100 * r['rate']:.1f}% of {r['n']}" for r in found], fontsize=8)
    axes.set_ylabel("% of content versions BLOCK")
    axes.set_xlabel("policy version")
    return figure


def enforcement_lags(con: duckdb.DuckDBPyConnection) -> list[float]:
    """Decision written -> revision served, ms, for every revision that had an action."""
    return [
        r["lag"]
        for r in rows(
            con,
            """
        WITH served AS (SELECT content_id, content_version, decision_revision, min(ts) AS served_ts
                        FROM visibility GROUP BY ALL)
        SELECT (s.served_ts - d._timestamp)::DOUBLE AS lag
        FROM actions a
        JOIN decisions d USING (content_id, content_version, decision_revision)
        JOIN served s USING (content_id, content_version, decision_revision)
        WHERE d._timestamp IS NOT NULL AND d._timestamp > 0 ORDER BY lag""",
        )
    ]


def _mark_p50_p99(axes: Any, ordered: list[float], value_format: str) -> None:
    """Vertical lines at the p50 and p99 of `ordered` (sorted ascending), labelled with
    `value_format`."""
    for fraction, style in ((0.5, "--"), (0.99, ":")):
        value = ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]
        axes.axvline(
            value,
            color=COLORS["BLOCK"],
            linestyle=style,
            label=f"p{int(fraction * 100)} {value_format.format(value)}",
        )


def enforcement_lag(con: duckdb.DuckDBPyConnection) -> Figure:
    figure, axes = new_figure()
    lags = enforcement_lags(con)
    if not lags:
        no_data(axes, "no data (no action matched with a content.visibility record)")
        return figure
    axes.hist(lags, bins=min(40, max(5, len(lags) // 3)), color="#34495e")
    _mark_p50_p99(axes, lags, "{:.0f} ms")
    axes.set_xlabel("ms from the decision written to its revision served")
    axes.set_ylabel("actions")
    axes.legend(fontsize=8)
    return figure


def exposure_windows(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """One row per restricted version that had been shown: its window (ms) and trigger (a
    record archived twice, after a restart of the archiver's reads, counts once)."""
    return rows(
        con,
        """
        SELECT content_id, content_version, any_value(trigger) AS trigger,
            min(exposure_ms)::DOUBLE AS exposure_ms
        FROM exposure GROUP BY content_id, content_version ORDER BY exposure_ms""",
    )


def exposure_window(con: duckdb.DuckDBPyConnection) -> Figure:
    figure, axes = new_figure()
    found = exposure_windows(con)
    if not found:
        no_data(axes, "no data (no version was shown and then restricted)")
        return figure
    windows = [row["exposure_ms"] / 1000 for row in found]
    triggers = sorted({row["trigger"] for row in found})
    bins = min(40, max(5, len(windows) // 3))
    axes.hist(
        [[r["exposure_ms"] / 1000 for r in found if r["trigger"] == t] for t in triggers],
        bins=bins,
        stacked=True,
        label=[f"{t} ({sum(r['trigger'] == t for r in found)})" for t in triggers],
    )
    _mark_p50_p99(axes, windows, "{:.1f} s")
    axes.set_xlabel("s shown before the BLOCK or RESTRICT took effect")
    axes.set_ylabel("content versions (by trigger)")
    axes.legend(fontsize=8)
    return figure


def unknown_rate_by_detector(con: duckdb.DuckDBPyConnection) -> Figure:
    figure, axes = new_figure()
    found = rows(
        con,
        """
        WITH latest AS (SELECT * FROM decisions QUALIFY row_number() OVER (
                PARTITION BY content_id, content_version ORDER BY decision_revision DESC) = 1),
            named AS (
                SELECT u.detector, content_id, content_version, true AS unknown
                FROM latest, unnest(completeness.unknown) AS u(detector)
                UNION ALL
                SELECT e.item.detector, content_id, content_version, false
                FROM latest, unnest(evidence) AS e(item))
        SELECT detector, count(DISTINCT (content_id, content_version)) AS versions,
            count(DISTINCT (content_id, content_version)) FILTER (WHERE unknown) AS unknown
        FROM named GROUP BY detector ORDER BY detector""",
    )
    if not found:
        no_data(axes)
        return figure
    bars = axes.bar(
        [r["detector"] for r in found],
        [100 * r["unknown"] / r["versions"] for r in found],
        color="#8e44ad",
    )
    axes.bar_label(bars, labels=[f"{r['unknown']}/{r['versions']}" for r in found], fontsize=8)
    axes.set_ylabel("% of content versions unknown")
    axes.set_xlabel("detector")
    return figure


def score_results(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """The archive's ok detector results as modstream/scanning/drift.py reads them (scores a
    dict)."""
    found = rows(
        con,
        "SELECT DISTINCT ON (event_id) detector, model_version, status, ts, scores "
        "FROM detector_results WHERE status = 'ok' AND scores IS NOT NULL",
    )
    return [{**row, "scores": dict(row["scores"])} for row in found]


def score_drift(con: duckdb.DuckDBPyConnection) -> Figure:
    """PSI per detector, score label and model version over time, the alert's 0.2 marked."""
    figure, axes = new_figure()
    points = drift.drift_points(score_results(con))
    if not points:
        no_data(axes, "no data (too few scores for two windows)")
        return figure
    series: dict[drift.Series, list[drift.DriftPoint]] = {}
    for point in points:
        series.setdefault((point.detector, point.model_version, point.label), []).append(point)
    for (detector, model_version, label), found in sorted(series.items()):
        axes.plot(
            [_utc(point.start_ts) for point in found],
            [point.psi for point in found],
            marker="o",
            label=f"{detector} {label} ({model_version})",
        )
    axes.axhline(drift.DRIFTED, color="#c0392b", linestyle="--", linewidth=1, label="alert: 0.2")
    axes.set_ylabel("PSI against the windows before")
    axes.set_xlabel("window start (UTC)")
    axes.legend(fontsize=7)
    return figure


def _utc(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def review_backlog(con: duckdb.DuckDBPyConnection) -> Figure:
    figure, axes = new_figure()
    found = rows(
        con,
        """
        SELECT t.queue, count(DISTINCT t.task_id) AS opened, count(DISTINCT r.task_id) AS closed
        FROM review_tasks t LEFT JOIN review_decisions r USING (task_id)
        GROUP BY t.queue ORDER BY t.queue""",
    )
    if not found:
        no_data(axes)
        return figure
    x = range(len(found))
    for offset, (key, color) in enumerate(
        (("opened", "#2980b9"), ("closed", "#27ae60"), ("open", "#c0392b"))
    ):
        values = [r["opened"] - r["closed"] if key == "open" else r[key] for r in found]
        bars = axes.bar(
            [i + (offset - 1) * 0.27 for i in x], values, width=0.27, label=key, color=color
        )
        axes.bar_label(bars, fontsize=8)
    axes.set_xticks(list(x), [r["queue"] for r in found])
    axes.set_ylabel("review tasks")
    axes.set_xlabel("queue")
    axes.legend(fontsize=8)
    return figure


def shadow_disagreement(con: duckdb.DuckDBPyConnection) -> Figure:
    figure, axes = new_figure()
    found = rows(
        con,
        f"""
        WITH s AS ({_LATEST.format(table="shadow")}),
            a AS (SELECT content_id, content_version,
                         arg_max(outcome, decision_revision) AS outcome
                  FROM decisions GROUP BY ALL)
        SELECT s.policy_version, a.outcome AS active, s.outcome AS shadow, count(*) AS n
        FROM s JOIN a USING (content_id, content_version)
        GROUP BY ALL ORDER BY s.policy_version, n DESC""",
    )
    if not found:
        no_data(axes, "no data (no shadow or canary decisions)")
        return figure
    changed = [r for r in found if r["active"] != r["shadow"]]
    versions = sorted({r["policy_version"] for r in found})
    totals = {v: sum(r["n"] for r in found if r["policy_version"] == v) for v in versions}
    labels = [f"v{r['policy_version']}: {r['active']} -> {r['shadow']}" for r in changed]
    values = [100 * r["n"] / totals[r["policy_version"]] for r in changed]
    if not changed:
        no_data(axes, f"no disagreement over {sum(totals.values())} content versions")
        return figure
    bars = axes.barh(labels[::-1], values[::-1], color="#7f8c8d")
    axes.bar_label(bars, labels=[str(r["n"]) for r in changed[::-1]], fontsize=8)
    axes.set_xlabel("% of the version's compared content versions (active -> shadow)")
    return figure


def dlq_by_class(con: duckdb.DuckDBPyConnection) -> Figure:
    figure, axes = new_figure()
    found = rows(con, "SELECT error_class, count(*) AS n FROM dlq GROUP BY ALL ORDER BY n DESC")
    if not found:
        no_data(axes)
        return figure
    bars = axes.bar([r["error_class"] for r in found], [r["n"] for r in found], color="#95a5a6")
    axes.bar_label(bars, fontsize=8)
    axes.set_ylabel("DLQ records")
    return figure


# title, plot, caption: in the report's order.
PLOTS: tuple[tuple[str, Plot, str], ...] = (
    (
        "Decisions by outcome over time",
        outcomes_over_time,
        "Every decision revision, by the event time of what caused it.",
    ),
    (
        "Block rate by policy version",
        block_rate_by_version,
        "Share of content versions whose latest decision under that version is BLOCK; shadow and "
        "canary versions (moderation.shadow) in grey.",
    ),
    (
        "Enforcement lag",
        enforcement_lag,
        "From the decision's Kafka timestamp (written by the moderation job) to the ts of the "
        "first content.visibility record showing its revision (served by the Content Service), for "
        "revisions with an action. Processing time, checkpoint interval included.",
    ),
    (
        "Exposure window",
        exposure_window,
        "Per content version shown (public or limited) and later restricted (BLOCK or RESTRICT): "
        "from the ts of its first content.visibility record showing it to the ts of the first "
        "one showing the restriction in effect, by the restrictive decision's trigger (the "
        "archive's exposure table). Versions restricted before they were shown are not in it.",
    ),
    (
        "Unknown rate by detector",
        unknown_rate_by_detector,
        "Of the content versions whose latest decision names the detector (evidence or "
        "completeness.unknown), the share that name it unknown (timed out, errored, missing).",
    ),
    (
        "Review backlog by queue",
        review_backlog,
        "Review tasks opened (review.tasks) and closed by a review decision with the same task_id; "
        "open = opened - closed.",
    ),
    (
        "Shadow disagreement",
        shadow_disagreement,
        "Latest shadow outcome vs latest active outcome per content version, by shadow version: "
        "the changed outcomes, as a share of the versions compared.",
    ),
    ("Dead letters by error class", dlq_by_class, "moderation.dlq records by error_class."),
    (
        "Score drift",
        score_drift,
        "Population-stability index of each detector's ok scores (per model version and score "
        "label; ten buckets of [0, 1]) in each window against the windows before it: an hour "
        "against the day before, as ModstreamScoreDrift, once the archive holds more than a day; "
        "a younger archive in four windows, each against all before it. Above 0.2: a shift, "
        "once the windows hold hundreds of scores: by chance alone PSI is about "
        "9 × (1/n_before + 1/n_now), well above 0.2 on a few dozen.",
    ),
)
