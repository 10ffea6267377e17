"""`modstream report --out report.html`: one self-contained HTML file from a deployment's
Parquet archive, its plots embedded as base64 PNG, so it can be mailed or attached to a ticket
and opened anywhere without the archive, a server or a network.

The plots and their definitions are in modstream/analytics/report_plots.py; this module runs them
over the archive's DuckDB views (modstream/analytics/streams.py), adds a table of totals and writes
the page.
"""

from __future__ import annotations

import base64
import datetime
import html
import io
from pathlib import Path
from typing import Any

import duckdb
from matplotlib.figure import Figure

from modstream.analytics import quality, report_plots
from modstream.analytics import streams as analytics
from modstream.analytics.archive_schema import TABLES
from modstream.analytics.labels import refused_event_ids
from modstream.core.config import Settings
from modstream.review import agreement

# Every plot of the page, in its order (issue 29's quality plots after the others).
PLOTS = report_plots.PLOTS + quality.PLOTS
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 60em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; }
figure { margin: 0; } figcaption { color: #555; font-size: 0.9em; }
img { max-width: 100%; }
table { border-collapse: collapse; margin: 0.5em 0; }
td, th { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
th { background: #f4f4f4; } td:first-child, th:first-child { text-align: left; }
.meta { color: #555; font-size: 0.9em; }
"""


def write(
    settings: Settings | None,
    prefix: str | None,
    out: Path,
    *,
    root: Path | None = None,
) -> Path:
    """Write the report of the archive of deployment `prefix` (or of `root`) to `out`."""
    where = analytics.root_of(settings, prefix, root)
    con = analytics.connect(root=where)
    try:
        page = render(con, title=f"modstream report: {prefix or 'default'}", source=where)
    finally:
        con.close()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out


def png(figure: Figure) -> str:
    """A figure as a data: URI of its PNG."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=96)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def render(con: duckdb.DuckDBPyConnection, *, title: str, source: Path) -> str:
    """The whole page: a header, the totals, then every plot with its caption."""
    generated = datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="meta">From the archive {html.escape(str(source))}; generated {generated}.</p>',
        "<h2>Totals</h2>",
        _table(["table", "rows"], [[name, n] for name, n in totals(con).items()]),
        "<h2>Latest outcome per content version</h2>",
        _table(["outcome", "content versions"], latest_outcomes(con)),
        "<h2>Cost per decision by policy and workflow version</h2>",
        _table(COST_COLUMNS, cost_per_decision(con)),
        f'<p class="meta">{html.escape(COST_NOTE)}</p>',
        "<h2>Second reviews: agreement per queue and reviewer pair</h2>",
        _table(AGREEMENT_COLUMNS, second_reviews(con)),
        f'<p class="meta">{html.escape(AGREEMENT_NOTE)}</p>',
    ]
    for heading, plot, caption in PLOTS:
        try:
            image = png(plot(con))
        except duckdb.Error as error:  # a query the archive cannot answer: say so, go on
            figure, axes = report_plots.new_figure()
            report_plots.no_data(axes, f"could not compute: {type(error).__name__}")
            image = png(figure)
        parts += [
            f"<h2>{html.escape(heading)}</h2>",
            f'<figure><img alt="{html.escape(heading)}" src="{image}">',
            f"<figcaption>{html.escape(caption)}</figcaption></figure>",
        ]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def totals(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Rows per archive table."""
    counts = {}
    for name in TABLES:
        counts[name] = int(con.sql(f'SELECT count(*) FROM "{name}"').fetchall()[0][0])
    return counts


def latest_outcomes(con: duckdb.DuckDBPyConnection) -> list[list[Any]]:
    """[outcome, content versions] by the latest decision revision of each content version."""
    found = con.sql(
        "SELECT outcome, count(*) FROM (SELECT arg_max(outcome, decision_revision) AS outcome "
        "FROM decisions GROUP BY content_id, content_version) GROUP BY ALL ORDER BY 2 DESC"
    ).fetchall()
    return [[outcome, n] for outcome, n in found]


COST_COLUMNS = [
    "policy version", "workflow version", "decisions", "detector calls / decision",
    "inference ms / decision", "review minutes / decision", "re-evaluations / decision",
]  # fmt: skip
COST_NOTE = (
    "Per content version decided, by its latest revision's policy and workflow version "
    "(modstream/analytics/cost.py, the archive's cost_per_decision view): detector.results "
    "answered, "
    "their inference_ms (the scan job's share of each model call), minutes from each review "
    "task to its first review decision (queue wait included), revisions by reevaluation or "
    "policy_change."
)


def cost_per_decision(con: duckdb.DuckDBPyConnection) -> list[list[Any]]:
    """The archive's cost_per_decision view, per decision."""
    found = con.sql(
        "SELECT policy_version, workflow_version, decisions, detector_calls_per_decision, "
        "inference_ms_per_decision, review_minutes_per_decision, reevaluations_per_decision "
        "FROM cost_per_decision"
    ).fetchall()
    return [["-" if cell is None else cell for cell in row] for row in found]


AGREEMENT_COLUMNS = ["queue", "reviewer pair", "compared", "agreed", "Cohen's kappa"]
AGREEMENT_NOTE = (
    "Each second review (the policy's second_review: required or a sampled blind one) against "
    "the first review of the task it names, per the first task's queue and the pair of "
    "reviewers; refused reviews (in the DLQ) left out. Kappa = (p_o - p_e) / (1 - p_e), '-' "
    "where undefined (both always gave one and the same outcome). The live counter: "
    "second_reviews (docs/OPERATIONS.md)."
)


def second_reviews(con: duckdb.DuckDBPyConnection) -> list[list[Any]]:
    """[queue, pair, compared, agreed, kappa] from the archived review tasks and decisions
    (modstream/review/agreement.py `second_review_summary`); none from an archive written before
    review tasks carried `second_review`."""
    try:
        tasks = (
            con.sql('SELECT content_id, task_id, queue, second_review FROM "review_tasks"')
            .to_arrow_table()
            .to_pylist()
        )
        reviews = (
            con.sql(
                "SELECT event_id, content_id, task_id, reviewer_id, outcome, ts "
                'FROM "review_decisions"'
            )
            .to_arrow_table()
            .to_pylist()
        )
        letters = con.sql('SELECT source_topic, raw FROM "dlq"').to_arrow_table().to_pylist()
    except duckdb.Error:
        return []
    refused = refused_event_ids(letters)
    kept = [review for review in reviews if review["event_id"] not in refused]
    return [
        [
            row["queue"],
            row["pair"],
            row["items"],
            row["agreed"],
            "-" if row["kappa"] is None else f"{row['kappa']:.2f}",
        ]
        for row in agreement.second_review_summary(tasks, kept)
    ]


def _table(header: list[str], body: list[list[Any]]) -> str:
    if not body:
        return "<p>no data</p>"
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    cells = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in body
    )
    return f"<table><tr>{head}</tr>{cells}</table>"
