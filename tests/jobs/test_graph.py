"""The architecture diagram and table against the code (modstream/jobs/graph.py): the committed
docs/img/architecture.json and the jobs table in docs/architecture.md are what the jobs declare
now, and each job's declared topics cover every topic its modules name when they write or read."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from modstream.core.topics import TOPICS
from modstream.jobs import graph

ROOT = Path(__file__).resolve().parents[2]
REGENERATE = "run `make docs` and commit docs/img/ and docs/architecture.md"

# The modules that wire each job (and its batch handling, which names the output topics).
JOB_MODULES = {
    "moderation": ["modstream/jobs/moderation/*.py"],
    "ingest check": ["modstream/jobs/ingest_check.py"],
    "scan": ["modstream/jobs/scan/*.py", "modstream/scanning/batch.py"],
    "enforce": ["modstream/jobs/enforce.py"],
    "reconciler": ["modstream/jobs/reconciler.py", "modstream/jobs/review_wait.py"],
}


def test_the_committed_diagram_data_is_what_the_code_declares() -> None:
    committed = json.loads((ROOT / "docs/img/architecture.json").read_text())
    assert committed == graph.declared(), REGENERATE
    assert (ROOT / "docs/img/architecture.svg").stat().st_size > 0


def test_the_jobs_table_in_architecture_md_is_what_the_code_declares() -> None:
    document = (ROOT / "docs/architecture.md").read_text()
    assert graph.with_table(document, graph.jobs_table(graph.declared())) == document, REGENERATE


def test_every_topic_drawn_is_in_the_topic_table_and_every_topic_has_a_writer() -> None:
    known = {spec.name for spec in TOPICS}
    nodes = graph.declared()["nodes"]
    named = {topic for node in nodes for topic in (*node["reads"], *node["writes"])}
    written = {topic for node in nodes for topic in node["writes"]}
    assert named <= known
    assert written == known


def _topics_named(path: Path) -> set[str]:
    """String literals passed to `physical(...)` or `topic(...)` in one module."""
    named = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("physical", "topic")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            named.add(node.args[0].value)
    return named


@pytest.mark.parametrize("job", sorted(JOB_MODULES))
def test_a_job_names_no_topic_its_declared_lists_leave_out(job: str) -> None:
    nodes = [n for n in graph.declared()["nodes"] if n["kind"] == "job"]
    mine = [n for n in nodes if n["name"] == job or n["name"].startswith(f"{job} ")]
    assert mine, f"no job {job!r} in the graph"
    declared = {topic for node in mine for topic in (*node["reads"], *node["writes"])}
    paths = [path for pattern in JOB_MODULES[job] for path in sorted(ROOT.glob(pattern))]
    named = set().union(*(_topics_named(path) for path in paths))
    assert named, f"{job}: found no topic in {JOB_MODULES[job]}"
    assert named <= declared, f"{job} names {sorted(named - declared)} outside its declared lists"


def test_the_generator_writes_the_data_the_picture_and_the_table(tmp_path: Path) -> None:
    document = tmp_path / "architecture.md"
    document.write_text("# A\n\n<!-- jobs:begin -->\nold\n<!-- jobs:end -->\n\n## B\n")
    written = graph.write(tmp_path / "img", document)
    assert [path.name for path in written] == [
        "architecture.json",
        "architecture.svg",
        "architecture.md",
    ]
    assert json.loads(written[0].read_text()) == graph.declared()
    assert written[1].read_text().lstrip().startswith("<?xml")
    text = document.read_text()
    assert "old" not in text and "| reconciler | `modstream.jobs.reconciler` |" in text
    assert text.endswith("<!-- jobs:end -->\n\n## B\n")


def test_a_document_without_the_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="jobs:begin"):
        graph.with_table("# no markers\n", "| table |")


def test_docs_topics_md_has_a_row_for_every_topic_of_the_table() -> None:
    rows = {
        line.split("|")[1].strip()
        for line in (ROOT / "docs/topics.md").read_text().splitlines()
        if line.startswith("| ") and not line.startswith("| topic ")
    }
    assert {spec.name for spec in TOPICS} <= rows
