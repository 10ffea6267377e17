"""`modstream replay`: the moderation job's own operators on Flink, files instead of Kafka.

Each input line is `{"topic": NAME, "value": {...}}`, in `ts` order (evidence may carry an
earlier `ts` than its upsert). `--policy` is a trusted, unsigned policy file; policy records in
the input are verified with MODSTREAM_POLICY_KEY as in production. Output: one
`<topic>.jsonl` per output topic in the out directory, one record a line, written by the job
itself (`files.write_files`, one writer): collecting the rows back to this process over py4j
cost several round trips a row and was most of a replay's time (docs/BENCHMARKS.md, "Replay").
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from modstream.contract.records import contract_key
from modstream.core.config import Settings
from modstream.core.progress import Progress
from modstream.moderation.step import OUTPUT_TOPICS

if TYPE_CHECKING:
    from modstream.jobs.moderation.config import ModerationConfig
    from modstream.jobs.runtime import JobConfig

SCAN_REQUESTS = "scan.requests."
REPLAY_TOPICS = tuple(topic for topic in OUTPUT_TOPICS if not topic.startswith(SCAN_REQUESTS))

# Replay input is in ts order except evidence, which may be earlier than its upsert: a wide
# bound keeps every record on time, so the order of processing is the order of ts.
REPLAY_OUT_OF_ORDERNESS_MS = 7 * 86_400_000
REPLAY_LANE = "replay"  # one file, one lane of event time


def command(events: Path, policy: Path, out: Path, parallelism: int = 1, *extra: str) -> list[str]:
    """The argv of `modstream replay` as a user runs it (its own process and MiniCluster), for
    the tests and benchmarks that time or check it from outside."""
    return [
        sys.executable,
        "-m",
        "modstream.cli.main",
        "replay",
        "--input",
        str(events),
        "--policy",
        str(policy),
        "--out",
        str(out),
        "--parallelism",
        str(parallelism),
        *extra,
    ]


def _rows(input_path: Path, shown: Progress) -> list[tuple[str, str | None, str, int]]:
    """(topic, key, value, ts) rows; a line that is not a record becomes DLQ input."""
    rows = []
    with open(input_path, "rb") as lines:
        for data in shown.track(lines):
            row = _row(data)
            if row is not None:
                rows.append(row)
    return rows


def _row(data: bytes) -> tuple[str, str | None, str, int] | None:
    """One line as a row. A line that is not UTF-8, not a `{topic, value}` envelope or nested
    too deep to read is a `replay.input` row (the job dead-letters it); an object value is
    written back with every field it had, duplicated names included, so the job validates the
    record as written, not a cleaned copy (tests/fuzz/test_replay.py)."""
    try:
        line = data.decode("utf-8")
    except UnicodeDecodeError:
        return "replay.input", None, data.decode("utf-8", errors="replace").rstrip("\n"), 0
    if not line.strip():
        return None
    try:
        envelope = dict(json.loads(line, object_pairs_hook=_Fields))
        topic = envelope["topic"]
        value = envelope["value"]
        text = value if isinstance(value, str) else _json_text(value)
        fields = dict(value) if isinstance(value, _Fields) else value
        key = contract_key(str(topic), fields)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return "replay.input", None, line.rstrip("\n"), 0
    ts = fields.get("ts") if isinstance(fields, dict) else None
    if not (isinstance(ts, int) and not isinstance(ts, bool) and 0 <= ts < 2**63):
        ts = 0  # a Row's LONG carries no other value; the job refuses such a record anyway
    return str(topic), key if isinstance(key, str) else None, text, ts


class _Fields(list[Any]):
    """A JSON object as read: its (name, value) pairs, a duplicated name kept."""


def _json_text(value: Any) -> str:
    """The JSON text of a value read with `_Fields`; non-ASCII kept unless the value holds a
    lone surrogate (no UTF-8 text can carry one), then escaped."""
    try:
        text = _dumps(value, ascii_only=False)
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _dumps(value, ascii_only=True)


def _dumps(value: Any, *, ascii_only: bool) -> str:
    if isinstance(value, _Fields):
        return (
            "{"
            + ", ".join(
                json.dumps(name, ensure_ascii=ascii_only)
                + ": "
                + _dumps(item, ascii_only=ascii_only)
                for name, item in value
            )
            + "}"
        )
    if isinstance(value, list):
        return "[" + ", ".join(_dumps(item, ascii_only=ascii_only) for item in value) + "]"
    return json.dumps(value, ensure_ascii=ascii_only)


def _lines(path: Path) -> int:
    """Records in an output file (the job wrote them; the client never holds them)."""
    with open(path, "rb") as lines:
        return sum(1 for _ in lines)


def run(
    input_path: Path,
    policy_path: Path,
    out_dir: Path,
    parallelism: int = 1,
    *,
    scan_requests: bool = False,
    engine: str = "batched",
) -> int:
    from modstream.jobs import files, runtime
    from modstream.jobs.moderation.job import build

    settings = Settings.from_env()
    policy = yaml.safe_load(policy_path.read_text(encoding="utf-8"))
    config = _moderation_config(policy, engine)
    with Progress("replay") as shown:  # on stderr (modstream/core/progress.py)
        shown.phase(f"reading {input_path}", unit="lines")
        rows = _rows(input_path, shown)
        with shown.waiting("starting a local Flink MiniCluster"):
            env = runtime.create_env(_job_config(parallelism), settings)
        env.set_parallelism(parallelism)
        source = _source(env, rows)
        out_dir.mkdir(parents=True, exist_ok=True)
        for topic in REPLAY_TOPICS:
            (out_dir / f"{topic}.jsonl").write_text("", encoding="utf-8")
        # Scan requests are work for the detectors, which a replay does not run: its evidence
        # is in the input file. They are not replay output, unless asked for
        # (`--scan-requests`: what cost ordering asked, docs/scanning.md).
        skip = "" if scan_requests else SCAN_REQUESTS
        build(env, source, lambda stream: files.write_files(stream, out_dir, skip), config)
        with shown.waiting(f"running the moderation job on {len(rows)} records"):
            env.execute("replay")
    print(
        f"replay: {len(rows)} input records -> "
        + ", ".join(f"{topic} {_lines(out_dir / f'{topic}.jsonl')}" for topic in REPLAY_TOPICS),
        file=sys.stderr,
    )
    return 0


def _moderation_config(policy: Any, engine: str) -> ModerationConfig:
    """The moderation job's configuration for a replay: `policy` trusted, event time from the
    file alone."""
    from modstream.jobs.moderation.config import ModerationConfig

    policy_id = str(policy.get("policy_id", "global")) if isinstance(policy, dict) else "global"
    return ModerationConfig.from_options(
        {
            "policy_id": policy_id,
            "out_of_orderness_ms": REPLAY_OUT_OF_ORDERNESS_MS,
            "idleness_ms": 3_600_000,
            "engine": engine,
        },
        trusted_policy=policy,
        # The processing clock is fixed at the start (admission of future-stamped input does
        # not depend on how long the run takes) and event time follows the file alone.
        now_ms=int(time.time() * 1000),
        wall_clock=False,
    )


def _job_config(parallelism: int) -> JobConfig:
    """No broker, a throwaway checkpoint directory, no restarts."""
    from modstream.jobs import runtime

    return runtime.JobConfig(
        name="replay",
        bootstrap_servers="",
        checkpoint_dir=Path(tempfile.mkdtemp()),
        transactional_id_prefix="replay",
        group_id="replay",
        parallelism=parallelism,
        checkpoint_interval_ms=3_600_000,
        restart_strategy="none",
    )


def _source(env: Any, rows: list[tuple[str, str | None, str, int]]) -> Any:
    """The rows as one stream, in file order."""
    from pyflink.common import Row, Types

    # The file's order is the stream's order: one source and everything before key_by at
    # parallelism 1, and each row carries its line number, so records with equal ts are
    # applied in file order even when they reach their key by different paths (reports go
    # through the reporter gate first).
    return env.from_collection(
        [
            Row(topic, key, text, ts, REPLAY_LANE, line)
            for line, (topic, key, text, ts) in enumerate(rows)
        ],
        type_info=Types.ROW(
            [
                Types.STRING(),
                Types.STRING(),
                Types.STRING(),
                Types.LONG(),
                Types.STRING(),
                Types.LONG(),
            ]
        ),
    ).set_parallelism(1)
