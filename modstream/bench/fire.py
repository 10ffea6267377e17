"""The moderation step as the job runs it, in process: `BatchedModerate.fire`, the Python side of
BatchedVersions.java (modstream/jobs/moderation/batch.py), called as Java calls it, on the
records Decode admits. What the job's interpreter does per event in the version operator:
`make bench-step`'s apply (the pure step, `Moderate.apply`) plus the adapter around it, the
metrics it reports included, and the MessagePack payloads in and out.

`Driver` keeps what the Java operator keeps (input held per version until the watermark, the
stored values, the versions' timers: `modstream.testing.flink.JavaKeyed`, the stand-in the
operators' tests use) in plain Python, outside the timed part: only `fire` is timed, in CPU
time. The watermark advances `step_ms` of event time per call, so a call carries
every version that became ready in that much event time (a live job calls every 200 ms of
processing time; a backlog's call carries thousands of versions).

`sanctions_cost` does the same for the sanctions operator (`BatchedSanctions.fire`, keyed by
author) on the sanctions rows the version operator's answers held, each at its `at`:

    python -m modstream.bench.fire --versions 55000 [--authors 40]

prints one JSON line: `fire_us_per_event`, `sanctions_us_per_event`, `sanctions_us_per_row` and
the accounts' stored bytes, on `modstream bench`'s workload (`BENCH_MIX`, its authors unless
`--authors` says how many).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from modstream.demo.workload import BENCH_MIX, for_kafka, generate
from modstream.jobs.moderation.batch import BatchedModerate
from modstream.jobs.moderation.config import ModerationConfig
from modstream.jobs.moderation.decode import Decode
from modstream.jobs.moderation.sanctions_batch import BatchedSanctions
from modstream.moderation.step import SANCTIONS
from modstream.testing.flink import JavaKeyed

KEYED = "keyed"  # Decode's route for the version operator's input (config.DECODED_ROW)
FIRE_STEP_MS = 200  # event time per `fire` call: a live job's batch interval
# A fixed processing clock and workload start for the in-process benches (`make bench-step`,
# `python -m modstream.bench.fire`), so every run decides the same way.
NOW_MS = 1_760_000_000_000


def bench_config(now_ms: int | None = None) -> ModerationConfig:
    """The job's configuration under the bench policy (modstream/bench/variants.py `POLICY`);
    `now_ms` fixes its processing clock (None: the wall clock, as the job's)."""
    import yaml

    from modstream.bench.variants import POLICY

    return ModerationConfig.from_options(
        None,
        trusted_policy=yaml.safe_load(POLICY.read_text(encoding="utf-8")),
        policy_key_from_env=False,
        now_ms=now_ms,
    )


def step_records(lines: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(topic, value) of every record of `lines`, topic by topic as a consumer reads them."""
    grouped = for_kafka(lines)
    return [(topic, value.decode()) for topic, pairs in grouped.items() for _, value in pairs]


def keyed_rows(config: ModerationConfig, records: list[tuple[str, str]]) -> list[Any]:
    """The DECODED_ROWs Decode admits of `records` (topic, value) for the version operator."""
    decode = Decode(config)
    rows = [decode.decode(topic, None, raw, 0, "0", 0) for topic, raw in records]
    return [row for row in rows if not isinstance(row, tuple) and row[0] == KEYED]


class Driver(JavaKeyed):
    """The version operator's Java side (`JavaKeyed`) around one `BatchedModerate`, fed a
    workload in ts order: `cpu_s` is the CPU time of its `fire` calls alone."""

    def __init__(self, config: ModerationConfig) -> None:
        super().__init__(BatchedModerate, config, broadcasts=True, keep_metrics=False)
        self.outputs = 0
        self.sanctions: list[tuple[Any, ...]] = []  # the rows for the sanctions operator

    def run(self, rows: list[Any], until: int, step_ms: int) -> None:
        """Every row in ts order, the watermark `step_ms` further per call, then at `until`."""
        for answer in _stepped(self, sorted(rows, key=lambda row: row[4]), until, step_ms):
            self.outputs += len(answer)
            self.sanctions += [row for row in answer if row[0] == SANCTIONS]


def _stepped(
    java: JavaKeyed, ordered: list[Any], until: int, step_ms: int
) -> Iterator[list[tuple[Any, ...]]]:
    """`ordered` (rows by ts) into `java`, the watermark `step_ms` further per call, then at
    `until`: each call's rows."""
    watermark = ordered[0][4] if ordered else until
    index = 0
    while index < len(ordered) or watermark < until:
        watermark = watermark + step_ms if index < len(ordered) else until
        while index < len(ordered) and ordered[index][4] <= watermark:
            java.element(ordered[index])
            index += 1
        yield java.watermark(watermark)


def sanctions_cost(
    config: ModerationConfig, rows: list[tuple[Any, ...]], step_ms: int
) -> dict[str, Any]:
    """`BatchedSanctions.fire` on `rows` (the version operator's sanctions rows: topic, author,
    value), held by author until the watermark passes their `at`, the watermark `step_ms`
    further per call, the accounts' timers fired as Java fires them: the calls' CPU seconds and
    the accounts' stored bytes at the end."""
    java = JavaKeyed(BatchedSanctions, config, keep_metrics=False)
    held = [
        (KEYED, author, topic, value, json.loads(value)["at"], 0) for topic, author, value in rows
    ]
    held.sort(key=lambda row: row[4])
    for _ in _stepped(java, held, held[-1][4] if held else 0, step_ms):
        pass
    sizes = [len(value) for value in java.values.values()]
    return {
        "cpu_s": java.cpu_s,
        "account_bytes_mean": round(sum(sizes) / max(len(sizes), 1)),
        "account_bytes_max": max(sizes, default=0),
        "authors": len(java.values),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m modstream.bench.fire", description=__doc__)
    parser.add_argument("--versions", type=int, default=6000)
    parser.add_argument("--authors", type=int, default=BENCH_MIX.authors)
    args = parser.parse_args(argv)
    started = NOW_MS - args.versions * 200 - 300_000
    mix = replace(BENCH_MIX, authors=args.authors)
    lines = generate(
        seed=5, versions=args.versions, start_ts=started, extras=False, malformed=False, mix=mix
    )
    records = step_records(lines)
    until = max(line["value"]["ts"] for line in lines)
    config = bench_config(now_ms=NOW_MS)
    driver = Driver(config)
    driver.run(keyed_rows(config, records), until, FIRE_STEP_MS)
    sanctions = sanctions_cost(config, driver.sanctions, FIRE_STEP_MS)
    events = len(records)
    print(
        json.dumps(
            {
                "versions": args.versions,
                "authors": args.authors,
                "events": events,
                "fire_us_per_event": round(driver.cpu_s / events * 1e6, 1),
                "sanctions_rows": len(driver.sanctions),
                "sanctions_us_per_event": round(sanctions["cpu_s"] / events * 1e6, 1),
                "sanctions_us_per_row": round(
                    sanctions["cpu_s"] / max(len(driver.sanctions), 1) * 1e6
                ),
                "authors_sanctioned": sanctions["authors"],
                "account_bytes_mean": sanctions["account_bytes_mean"],
                "account_bytes_max": sanctions["account_bytes_max"],
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
