"""Re-evaluation without Kafka, in two parts:

- selecting from `moderation.index` (modstream/ops/reevaluate.py): index records per second through
  decoding and selection, and the memory kept per selected version;
- re-deciding (`redecide`): N stored versions (the bench workload's states, copied under new
  content ids up to N), each sent one `moderation.reevaluate` record through the job's own
  admission and per-version code (`modstream.jobs.moderation.decode.admit`, `Moderate.apply`):
  versions per second and the detector calls it asked for (scan requests; stored evidence is reused,
  so none).

    .venv/bin/python -m modstream.bench.reevaluate [--records N] [--redecide N]

Records are built (JSON-encoded) before the clock starts; memory is measured in a second pass
under tracemalloc (which slows it, so the rate comes from the first pass).
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc
from typing import Any

import msgspec
from kafka.consumer.fetcher import ConsumerRecord

from modstream.demo.workload import for_kafka
from modstream.moderation import state_schema
from modstream.ops.reevaluate import Selection, scan_index


def index_records(count: int, selected_every: int) -> list[ConsumerRecord]:
    """`count` index records, one version in `selected_every` decided under v1 (the rest v2)."""
    records = []
    for n in range(count):
        value = {
            "content_id": f"content-{n:08d}",
            "content_version": 1,
            "decision_revision": 1,
            "outcome": "ALLOW",
            "state": "approved",
            "policy_id": "global",
            "policy_version": 1 if n % selected_every == 0 else 2,
            "surface": "comment",
            "region": "EU",
            "modality": "image",
            "detectors": ["media_check", "nsfw_image"],
            "human": False,
            "upload_ts": 1_700_000_000_000 + n,
            "ts": 1_700_000_000_500 + n,
        }
        raw = json.dumps(value).encode()
        records.append(ConsumerRecord("i", 0, 0, n, 0, 0, None, raw, [], None, -1, len(raw), -1))
    return records


def measure(count: int, selected_every: int) -> str:
    records = index_records(count, selected_every)
    selection = Selection("global", 2)
    started = time.perf_counter()
    selector = scan_index(records, selection, print)
    elapsed = time.perf_counter() - started
    tracemalloc.start()
    kept = scan_index(records, selection, print)
    retained, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    selected = len(selector.chosen())
    per = retained / max(len(kept.marks), 1)
    return (
        f"{count} index records, {selected} selected: {count / elapsed:,.0f} records/s, "
        f"{retained / 1e6:.1f} MB kept ({per:.0f} B per selected version)"
    )


def stored_versions(count: int) -> tuple[Any, dict[str, bytes], int]:
    """The peer engine after the bench workload, its states copied under new content ids up to
    `count` versions; the last input ts."""
    from modstream.bench.compare import step_engine, workload

    lines, _ = workload(6000)
    engine = step_engine()
    for topic, pairs in for_kafka(lines).items():
        for _, value in pairs:
            engine.admit(topic, value.decode(), topic, 0)
    last_ts = max(line["value"]["ts"] for line in lines)
    for _ in engine.drain(last_ts):
        pass
    templates = [state_schema.load_version(value) for value in engine.states.values()]
    states: dict[str, bytes] = {}
    for n in range(count):
        template = templates[n % len(templates)]
        assert template is not None
        state = msgspec.structs.replace(template, content_id=f"re{n}-{template.content_id}")
        states[f"{state.content_id}\x1f{state.content_version}"] = state_schema.dump_version(state)
    return engine, states, last_ts


def redecide(count: int) -> dict[str, Any]:
    """Every stored version re-decided once: versions/s, outputs by kind, detector calls."""
    from modstream.jobs.moderation.decode import admit
    from modstream.moderation.admission import Refused

    engine, states, last_ts = stored_versions(count)
    at = last_ts + 1000
    requests = [
        json.dumps({
            "event_id": f"reeval-{n}", "content_id": key.split("\x1f")[0],
            "content_version": int(key.split("\x1f")[1]), "reason": "policy global v2", "ts": at,
        })
        for n, key in enumerate(states)
    ]  # fmt: skip
    outputs: dict[str, int] = {}
    started = time.perf_counter()
    for (key, raw_state), request in zip(states.items(), requests, strict=True):
        verdict = admit(engine.config, "moderation.reevaluate", request, at, None)
        assert not isinstance(verdict, Refused), verdict
        inputs = [("moderation.reevaluate", verdict.record.model_dump_json(), at)]
        (state, out, _, _), _ = engine.moderate.apply(
            raw_state, inputs, at, engine.store, engine.banks
        )
        states[key] = state_schema.dump_version(state) if state is not None else b""
        for topic, _, _ in out:
            outputs[topic] = outputs.get(topic, 0) + 1
    elapsed = time.perf_counter() - started
    return {
        "versions": count,
        "versions_per_s": round(count / elapsed, 1),
        "detector_calls": sum(n for topic, n in outputs.items() if topic.startswith("scan.")),
        "outputs": dict(sorted(outputs.items())),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--redecide", type=int, default=100_000, help="stored versions")
    args = parser.parse_args()
    for every in (1, 100):
        print(measure(args.records, every))
    print(f"re-deciding: {json.dumps(redecide(args.redecide))}")


if __name__ == "__main__":
    main()
