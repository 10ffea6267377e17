"""Selecting from `moderation.index` (modstream/reevaluate.py) without Kafka: index records per
second through decoding and selection, and the memory kept per selected version.

    .venv/bin/python -m benchmarks.bench_reevaluate [--records N]

Records are built (JSON-encoded) before the clock starts; memory is measured in a second pass
under tracemalloc (which slows it, so the rate comes from the first pass).
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc

from kafka.consumer.fetcher import ConsumerRecord

from modstream.reevaluate import Selection, scan_index


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=100_000)
    args = parser.parse_args()
    for every in (1, 100):
        print(measure(args.records, every))


if __name__ == "__main__":
    main()
