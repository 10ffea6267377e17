"""The jobs and topics as the code declares them, and the architecture diagram drawn from them.

docs/architecture.md shows docs/img/architecture.svg and a table of the same jobs. `make docs`
(`python -m modstream.jobs.graph`) draws the picture from each job's own declared inputs and
outputs and the topic table (modstream/core/topics.py), writes what it drew to
docs/img/architecture.json beside it and the table between architecture.md's `jobs` markers;
tests/jobs/test_graph.py compares both with what the code declares now, so neither can drift
from the wiring unnoticed. The people and services outside the jobs (ACTORS) are the one
hand-written part.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from modstream.core.topics import TOPICS
from modstream.jobs import enforce, ingest_check, reconciler
from modstream.jobs import moderation as moderation_job
from modstream.jobs.scan import config as scan_config
from modstream.moderation.step import BROADCAST_TOPICS, KEYED_TOPICS, OUTPUT_TOPICS

DEFAULT_DIR = Path("docs/img")
ARCHITECTURE = Path("docs/architecture.md")
TABLE_BEGIN, TABLE_END = "<!-- jobs:begin -->", "<!-- jobs:end -->"


@dataclass(frozen=True)
class Node:
    """A job (`kind` "job") or someone outside the jobs (`kind` "actor") and the topics it
    reads and writes, by contract name."""

    name: str
    kind: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    module: str = ""  # a job's: what `python -m` and `flink run -pym` run


# Outside the Flink jobs: who writes their inputs and reads what they leave for people.
ACTORS = (
    Node("Content Service", "actor", (), ("content.versions",)),
    Node("users", "actor", (), ("moderation.reports", "moderation.appeals")),
    Node(
        "reviewers (console, modstream review)",
        "actor",
        ("review.tasks",),
        ("review.decisions", "review.leases", "review.access"),
    ),
    Node("review leads", "actor", (), ("review.grants",)),
    Node("policy authors (modstream policy)", "actor", (), ("policy.rules",)),
    Node("trust & safety (hash banks)", "actor", (), ("hash.bank",)),
    Node("modstream reevaluate", "actor", ("moderation.index",), ("moderation.reevaluate",)),
)


def jobs() -> list[Node]:
    """Every Flink job (each shipped scan pool as its own), from the lists its wiring uses."""
    scan_module = scan_config.__name__.rpartition(".")[0]
    return [
        Node(
            "moderation",
            "job",
            (*KEYED_TOPICS, *BROADCAST_TOPICS),
            tuple(OUTPUT_TOPICS),
            moderation_job.__name__,
        ),
        Node(
            "ingest check",
            "job",
            ingest_check.INPUT_TOPICS,
            ingest_check.OUTPUT_TOPICS,
            ingest_check.__name__,
        ),
        *(
            Node(
                f"scan {pool.name}",
                "job",
                tuple(pool.topics()),
                scan_config.OUTPUT_TOPICS,
                f"{scan_module} --pool {pool.name}={','.join(pool.modalities)}",
            )
            for pool in scan_config.POOLS
        ),
        Node("enforce", "job", enforce.INPUT_TOPICS, enforce.OUTPUT_TOPICS, enforce.__name__),
        Node(
            "reconciler",
            "job",
            reconciler.SOURCE_TOPICS,
            reconciler.OUTPUT_TOPICS,
            reconciler.__name__,
        ),
    ]


def declared() -> dict[str, Any]:
    """The graph as JSON data: the topic table's names and every node's reads and writes."""
    return {
        "topics": [spec.name for spec in TOPICS],
        "nodes": [
            {**asdict(node), "reads": list(node.reads), "writes": list(node.writes)}
            for node in (*jobs(), *ACTORS)
        ],
    }


# Written by every job: drawn as a note, not as an edge from each job (declared() keeps them).
EVERY_JOB_WRITES = "moderation.dlq"


@dataclass(frozen=True)
class _Placed:
    name: str
    kind: str  # "job", "actor" or "topic"
    column: int


def _columns(graph: dict[str, Any]) -> list[list[_Placed]]:
    """Layered columns: actors, their topics, then each job rank followed by the topics it
    writes. A job's rank is one past the highest rank of an earlier job writing its inputs;
    a topic stands after its highest-ranked writer."""
    nodes = [
        Node(n["name"], n["kind"], tuple(n["reads"]), tuple(n["writes"])) for n in graph["nodes"]
    ]
    rank: dict[str, int] = {}
    writer_rank: dict[str, int] = {}
    for node in (n for n in nodes if n.kind == "job"):
        rank[node.name] = 1 + max((writer_rank.get(t, 0) for t in node.reads), default=0)
        for topic in node.writes:
            writer_rank[topic] = max(writer_rank.get(topic, 0), rank[node.name])
    columns: list[list[_Placed]] = [[] for _ in range(2 * max(rank.values()) + 2)]
    for node in nodes:
        column = 0 if node.kind == "actor" else 2 * rank[node.name]
        columns[column].append(_Placed(node.name, node.kind, column))
    used = {t for n in nodes for t in (*n.reads, *n.writes)} - {EVERY_JOB_WRITES}
    for topic in (t for t in graph["topics"] if t in used):
        column = 2 * writer_rank[topic] + 1 if topic in writer_rank else 1
        columns[column].append(_Placed(topic, "topic", column))
    return [column for column in columns if column]


def _edges(graph: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(from, to, the job or actor it belongs to), reads as topic -> node."""
    edges = []
    for node in graph["nodes"]:
        edges += [(topic, node["name"], node["name"]) for topic in node["reads"]]
        edges += [(node["name"], topic, node["name"]) for topic in node["writes"]]
    return [edge for edge in edges if EVERY_JOB_WRITES not in edge[:2]]


def _ordered(columns: list[list[_Placed]], edges: list[tuple[str, str, str]]) -> dict[str, float]:
    """A row per node: each column sorted by the mean row of its neighbours in the columns
    beside it (barycentre sweeps, both ways), so that fewer edges cross; columns centred."""
    column_of = {p.name: i for i, column in enumerate(columns) for p in column}
    beside: dict[str, list[str]] = {}
    for a, b, _ in edges:
        if abs(column_of[a] - column_of[b]) == 1:
            beside.setdefault(a, []).append(b)
            beside.setdefault(b, []).append(a)
    tallest = max(len(column) for column in columns)
    row: dict[str, float] = {}

    def centre(column: list[_Placed]) -> None:
        offset = (tallest - len(column)) / 2
        row.update({p.name: offset + i for i, p in enumerate(column)})

    for column in columns:
        centre(column)
    sweeps = [*range(len(columns)), *reversed(range(len(columns)))] * 4
    for index in sweeps:
        column = columns[index]
        column.sort(
            key=lambda p: (
                sum(row[n] for n in beside[p.name]) / len(beside[p.name])
                if p.name in beside
                else row[p.name]
            )
        )
        centre(column)
    return row


@dataclass(frozen=True)
class _Frame:
    """Where things go on the page, in inches."""

    x_step: float = 2.45
    y_step: float = 0.42
    width: float = 2.05
    height: float = 0.3


def draw(graph: dict[str, Any], out: Path) -> None:
    """Draw `graph` to `out` (SVG or PNG by its suffix), reproducibly (no dates, fixed ids)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = _columns(graph)
    edges = _edges(graph)
    row = _ordered(columns, edges)
    placed = {p.name: p for column in columns for p in column}
    frame = _Frame()
    tallest = max(len(column) for column in columns)
    backward = [edge for edge in edges if _column(placed, edge[1]) < _column(placed, edge[0])]
    bottom = frame.y_step * tallest
    figure = plt.figure(
        figsize=(
            frame.x_step * len(columns) + 0.6,
            bottom + 0.2 * len(backward) + 0.9,
        )
    )
    axes = figure.add_axes((0.0, 0.0, 1.0, 1.0))
    axes.set_xlim(-0.5, frame.x_step * len(columns) + 0.1)
    axes.set_ylim(bottom + 0.2 * len(backward) + 0.5, -0.4)
    axes.axis("off")
    palette = plt.get_cmap("tab10")
    job_names = [n["name"] for n in graph["nodes"] if n["kind"] == "job"]
    colour = {name: palette(i % 10) for i, name in enumerate(job_names)}

    def centre(name: str) -> tuple[float, float]:
        return placed[name].column * frame.x_step + frame.width / 2, row[name] * frame.y_step

    lanes = iter(range(len(backward)))
    for a, b, owner in edges:
        (xa, ya), (xb, yb) = centre(a), centre(b)
        half = frame.width / 2
        if xb > xa:
            points = [(xa + half, ya), (xb - half, yb)]
        else:
            lane = next(lanes)
            low = bottom + 0.2 * (lane + 1)
            out_x, in_x = xa + half + 0.06 + 0.04 * lane, xb - half - 0.06 - 0.04 * lane
            points = [(xa + half, ya), (out_x, ya), (out_x, low), (in_x, low), (in_x, yb),
                      (xb - half, yb)]  # fmt: skip
        _arrow(axes, points, colour.get(owner, (0.5, 0.5, 0.5, 1.0)), dashed=xb <= xa)
    for name, node in placed.items():
        _box(axes, name, centre(name), node.kind, frame, colour.get(name))
    axes.text(
        -0.4, bottom + 0.2 * len(backward) + 0.3, f"Every job also writes {EVERY_JOB_WRITES}."
        " Dashed: read back by an earlier column (below the drawing). Colour: the job or the"
        " service an edge belongs to.", fontsize=7, va="center",
    )  # fmt: skip
    with plt.rc_context({"svg.hashsalt": "modstream", "svg.fonttype": "none"}):
        figure.savefig(out, metadata={"Date": None} if out.suffix == ".svg" else {"Software": None})
    plt.close(figure)


def _column(placed: dict[str, _Placed], name: str) -> int:
    return placed[name].column


def _arrow(axes: Any, points: list[tuple[float, float]], colour: Any, *, dashed: bool) -> None:
    """A polyline with an arrow head at its end."""
    from matplotlib.patches import FancyArrowPatch
    from matplotlib.path import Path as Polyline

    axes.add_patch(
        FancyArrowPatch(
            path=Polyline(points),
            arrowstyle="-|>",
            mutation_scale=7,
            linewidth=0.7,
            linestyle="--" if dashed else "-",
            alpha=0.8,
            color=colour,
            zorder=1,
        )
    )


def _box(
    axes: Any, name: str, at: tuple[float, float], kind: str, frame: _Frame, edge: Any
) -> None:
    """A job (square, coloured edge), an actor (grey) or a topic (rounded), named inside."""
    from matplotlib.patches import FancyBboxPatch

    x, y = at
    faces = {"job": "#fff4d6", "actor": "#e8e8e8", "topic": "white"}
    axes.add_patch(
        FancyBboxPatch(
            (x - frame.width / 2, y - frame.height / 2),
            frame.width,
            frame.height,
            boxstyle="round,pad=0,rounding_size=0.12" if kind == "topic" else "square,pad=0",
            facecolor=faces[kind],
            edgecolor=edge if edge is not None else "0.3",
            linewidth=1.6 if kind == "job" else 0.8,
            zorder=2,
        )
    )
    axes.text(
        x, y, name, ha="center", va="center", zorder=3,
        fontsize=8 if kind == "job" else 6.5, fontweight="bold" if kind == "job" else "normal",
    )  # fmt: skip


def jobs_table(graph: dict[str, Any]) -> str:
    """The jobs of `graph` as a Markdown table: what runs each, what it reads and writes."""

    def listed(topics: list[str]) -> str:
        return ", ".join(f"`{topic}`" for topic in topics)

    rows = [
        "| job | runs as `python -m` | reads | writes |",
        "|---|---|---|---|",
        *(
            f"| {n['name']} | `{n['module']}` | {listed(n['reads'])} | {listed(n['writes'])} |"
            for n in graph["nodes"]
            if n["kind"] == "job"
        ),
    ]
    return "\n".join(rows)


def with_table(document: str, table: str) -> str:
    """`document` with `table` between its jobs markers (each on a line of its own)."""
    head, begin, rest = document.partition(TABLE_BEGIN + "\n")
    _, end, tail = rest.partition(TABLE_END)
    if not begin or not end:
        raise ValueError(f"docs: {TABLE_BEGIN} ... {TABLE_END} not found")
    return f"{head}{begin}{table}\n{end}{tail}"


def write(out_dir: Path = DEFAULT_DIR, architecture: Path = ARCHITECTURE) -> list[Path]:
    """Write architecture.json (what the code declares), architecture.svg (its drawing) and
    the jobs table in `architecture`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    graph = declared()
    data = out_dir / "architecture.json"
    data.write_text(json.dumps(graph, indent=1) + "\n")
    image = out_dir / "architecture.svg"
    draw(graph, image)
    architecture.write_text(with_table(architecture.read_text(), jobs_table(graph)))
    return [data, image, architecture]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m modstream.jobs.graph",
        description="Redraw docs/img/architecture.svg from the jobs' declared topics.",
    )
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--architecture", type=Path, default=ARCHITECTURE)
    args = parser.parse_args(argv)
    for path in write(args.out_dir, args.architecture):
        print(f"docs: wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
