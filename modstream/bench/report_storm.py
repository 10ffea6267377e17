"""A viral item's report storm through `modstream replay`: how long the job takes.

    python -m modstream.bench.report_storm --reports 20000 --seconds 20

One text upload, then `--reports` reports from distinct reporters spread over `--seconds` of
event time, all on that one content version (one hot key), plus a second, quiet version whose
evidence arrives after the storm. Prints the replay's wall time and the outputs, so the cost of
the hot key can be compared between versions of the job (run it on each checkout).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from modstream.core.config import PROJECT_ROOT
from modstream.ops.replay import command
from modstream.testing.records import T0, evidence, upload


def storm(reports: int, seconds: int) -> list[dict[str, Any]]:
    text = {"modality": "text", "mime_type": "text/plain", "surface": "comment"}
    lines: list[dict[str, Any]] = [
        {"topic": "content.versions", "value": upload("viral", at=T0, **text)},
        {"topic": "content.versions", "value": upload("quiet", at=T0, **text)},
    ]
    span = seconds * 1000
    for index in range(reports):
        ts = T0 + 1 + index * span // reports
        lines.append(
            {
                "topic": "moderation.reports",
                "value": {
                    "event_id": f"storm-{index}",
                    "report_id": f"r-{index}",
                    "content_id": "viral",
                    "content_version": 1,
                    "reporter_id": f"reporter-{index}",
                    "reason": "spam",
                    "ts": ts,
                },
            }
        )
    lines.append({"topic": "detector.results", "value": evidence("quiet", at=T0 + span + 10)})
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=20_000)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--parallelism", type=int, default=1)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        events = Path(tmp) / "storm.jsonl"
        events.write_text(
            "".join(json.dumps(line) + "\n" for line in storm(args.reports, args.seconds))
        )
        started = time.monotonic()
        result = subprocess.run(
            command(
                events,
                PROJECT_ROOT / "policy_rules" / "global.yaml",
                Path(tmp) / "out",
                args.parallelism,
            ),
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        elapsed = time.monotonic() - started
        summary = [line for line in result.stderr.splitlines() if line.startswith("replay:")]
        print(
            json.dumps(
                {
                    "reports": args.reports,
                    "event_seconds": args.seconds,
                    "parallelism": args.parallelism,
                    "wall_s": round(elapsed, 1),
                    "rc": result.returncode,
                    "summary": summary[-1] if summary else result.stderr[-500:],
                }
            )
        )
        return result.returncode


if __name__ == "__main__":
    raise SystemExit(main())
