"""The demo's last step, what an analyst gets from the run (docs/ANALYSTS.md): the run's topics
archived to Parquet, its decisions graded against the shipped labels, and the HTML report.

The archive, the labels and the report stay in the run directory after `modstream down`, so
`modstream query --last-demo`, `modstream eval … --last-demo` and `modstream sql --last-demo`
work on yesterday's demo.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from modstream.analytics import archive, evaluation, report
from modstream.core.config import Settings
from modstream.core.progress import Progress
from modstream.stack import deployments

_EXAMPLE = "SELECT outcome, count(*) AS n FROM decisions GROUP BY ALL"


def report_path(settings: Settings, prefix: str) -> Path:
    return settings.run_dir / "demo" / f"report-{prefix}.html"


def analyse(
    settings: Settings,
    prefix: str,
    run_id: str,
    *,
    real: bool,
    shown: Progress,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Archive, grade, report; what the summary gets (`--json`) and, as text, what `say` prints."""
    rows = archive.run(settings, prefix, say=lambda _: None, progress=shown)
    labels = evaluation.demo_labels(settings, "real" if real else "generated")
    with shown.waiting("grading the decisions against the shipped labels"):
        graded = evaluation.run(settings, prefix, labels, run_id)
    with shown.waiting("writing the report"):
        page = report.write(settings, prefix, report_path(settings, prefix))
    say("")
    say(f"archive: {sum(rows.values())} rows in {deployments.archive_root(settings, prefix)}")
    say(f"safety quality against {labels.relative_to(settings.project_root)} (synthetic):")
    say(evaluation.format_table(graded))
    say(f"report: {page}")
    say(f"query it: modstream query --last-demo {_EXAMPLE!r}; modstream sql --last-demo …")
    evaluated = graded.to_dict()
    return {
        "archive": rows,
        "report": str(page),
        "eval": {"reasons": evaluated["reasons"], "coverage": evaluated["coverage"]},
    }
