"""`modstream replay`: the moderation job's own operators on Flink, files instead of Kafka.

Each input line is `{"topic": NAME, "value": {...}}`, in `ts` order (evidence may carry an
earlier `ts` than its upsert). `--policy` is a trusted, unsigned policy file; policy records in
the input are verified with MODSTREAM_POLICY_KEY as in production. Output: one
`<topic>.jsonl` per output topic in the out directory, one record a line.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from modstream import kafkaio
from modstream.config import Settings
from operators.moderation import OUTPUT_TOPICS

SCAN_REQUESTS = "scan.requests."
REPLAY_TOPICS = tuple(topic for topic in OUTPUT_TOPICS if not topic.startswith(SCAN_REQUESTS))

# Replay input is in ts order except evidence, which may be earlier than its upsert: a wide
# bound keeps every record on time, so the order of processing is the order of ts.
REPLAY_OUT_OF_ORDERNESS_MS = 7 * 86_400_000


def _rows(input_path: Path) -> list[tuple[str, str | None, str, int]]:
    """(topic, key, value, ts) rows; a line that is not a record becomes DLQ input."""
    rows = []
    with open(input_path, encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                continue
            try:
                envelope = json.loads(line)
                topic = envelope["topic"]
                value = envelope["value"]
                text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                key = kafkaio.contract_key(str(topic), value)
            except (ValueError, KeyError, TypeError, AttributeError):
                topic, key, text, value = "replay.input", None, line.rstrip("\n"), None
            ts = value.get("ts") if isinstance(value, dict) else None
            ts = ts if isinstance(ts, int) and not isinstance(ts, bool) and ts >= 0 else 0
            rows.append((str(topic), key if isinstance(key, str) else None, text, ts))
    return rows


def run(input_path: Path, policy_path: Path, out_dir: Path, parallelism: int = 1) -> int:
    from pyflink.common import Row, Types

    from jobs import runtime
    from jobs.moderation import ModerationConfig, build

    settings = Settings.from_env()
    policy = yaml.safe_load(policy_path.read_text(encoding="utf-8"))
    config = ModerationConfig(
        policy_id=str(policy.get("policy_id", "global")) if isinstance(policy, dict) else "global",
        out_of_orderness_ms=REPLAY_OUT_OF_ORDERNESS_MS,
        idleness_ms=3_600_000,
        policy_key=os.environ.get("MODSTREAM_POLICY_KEY"),
        trusted_policy=policy,
    )
    job = runtime.JobConfig(
        name="replay",
        bootstrap_servers="",
        checkpoint_dir=Path(tempfile.mkdtemp()),
        transactional_id_prefix="replay",
        group_id="replay",
        parallelism=parallelism,
        checkpoint_interval_ms=3_600_000,
        restart_strategy="none",
    )
    env = runtime.create_env(job, settings)
    env.set_parallelism(parallelism)
    rows = _rows(input_path)
    # The file's order is the stream's order: one source and everything before key_by at
    # parallelism 1, and each row carries its line number, so records with equal ts are
    # applied in file order even when they reach their key by different paths (reports go
    # through the reporter gate first).
    source = env.from_collection(
        [Row(topic, key, text, ts, line) for line, (topic, key, text, ts) in enumerate(rows)],
        type_info=Types.ROW(
            [Types.STRING(), Types.STRING(), Types.STRING(), Types.LONG(), Types.LONG()]
        ),
    ).set_parallelism(1)
    collected: list[Any] = []

    def sink(stream: Any) -> None:
        collected.append(stream)

    build(env, source, sink, config)
    written: dict[str, list[str]] = defaultdict(list)
    with collected[0].execute_and_collect("replay") as results:
        for row in results:
            # Scan requests are work for the detectors, which a replay does not run: its
            # evidence is in the input file. They are not replay output.
            if not row[0].startswith(SCAN_REQUESTS):
                written[row[0]].append(row[2])
    out_dir.mkdir(parents=True, exist_ok=True)
    for topic in sorted(set(REPLAY_TOPICS) | set(written)):
        path = out_dir / f"{topic}.jsonl"
        path.write_text("".join(line + "\n" for line in written.get(topic, [])), encoding="utf-8")
    print(
        f"replay: {len(rows)} input records -> "
        + ", ".join(f"{topic} {len(written.get(topic, []))}" for topic in REPLAY_TOPICS),
        file=sys.stderr,
    )
    return 0
