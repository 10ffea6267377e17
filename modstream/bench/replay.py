"""`modstream replay` of a generated workload: events/s, start-up included and not.

    python -m modstream.bench.replay --versions 20000      (make bench-replay)

Generates `modstream.demo.workload.generate(seed, versions=N)` (every modality, evidence, reports,
a review, appeals, a hash-bank entry, a signed policy version, malformed lines), written with
`modstream.demo.workload.write` (authority records signed), then runs `modstream replay` on it as a
user does (its own process and MiniCluster) and prints input records, wall time and events/s.
The replay's start-up (JVM, MiniCluster, Python workers) is measured separately with a
one-version workload, so the pace can be compared with the live job's (docs/BENCHMARKS.md),
which is measured on a running job. `--twice` replays the workload a second time and fails
unless every output file is byte-identical (replay is deterministic).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from modstream.core.config import PROJECT_ROOT
from modstream.demo.workload import generate, write
from modstream.ops.replay import command

# The test stack's signing setup (Makefile TEST_ENV), unless the caller set its own.
DEFAULT_ENV = {
    "MODSTREAM_SIGNING_DEV_SECRET": "modstream-test-signing",
    "MODSTREAM_SIGNATURES_REQUIRED": "all",
    "MODSTREAM_POLICY_KEY": "bench-replay-key",
}


def replay(events: Path, out: Path, parallelism: int, engine: str = "batched") -> tuple[float, str]:
    """Wall seconds of one `modstream replay` and its summary line; fails when it fails."""
    started = time.perf_counter()
    policy = PROJECT_ROOT / "policy_rules" / "global.yaml"
    result = subprocess.run(
        command(events, policy, out, parallelism, "--engine", engine),
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"replay failed ({result.returncode}):\n{result.stderr[-4000:]}")
    summary = [line for line in result.stderr.splitlines() if line.startswith("replay:")]
    return wall, summary[-1] if summary else ""


def differing(one: Path, two: Path) -> list[str]:
    """Output files of two replays that are not byte-identical."""
    names = sorted({path.name for path in one.iterdir()} | {path.name for path in two.iterdir()})
    return [
        name
        for name in names
        if not (one / name).is_file()
        or not (two / name).is_file()
        or (one / name).read_bytes() != (two / name).read_bytes()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--versions", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--parallelism", type=int, default=1)
    parser.add_argument("--twice", action="store_true", help="replay twice, compare outputs")
    parser.add_argument(
        "--engine",
        choices=("pyflink", "batched"),
        default="batched",
        help="modstream/jobs/moderation/job.py",
    )
    args = parser.parse_args(argv)
    for name, value in DEFAULT_ENV.items():
        os.environ.setdefault(name, value)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        write(generate(seed=args.seed, versions=1, extras=False), base / "one.jsonl")
        startup, _ = replay(base / "one.jsonl", base / "out-one", args.parallelism, args.engine)
        events = base / f"w{args.versions}.jsonl"
        write(generate(seed=args.seed, versions=args.versions), events)
        with open(events, "rb") as lines:
            records = sum(1 for _ in lines)
        wall, summary = replay(events, base / "out", args.parallelism, args.engine)
        print(
            f"versions {args.versions}, input records {records}, parallelism {args.parallelism},"
            f" engine {args.engine}"
        )
        print(summary)
        print(f"start-up (1-version replay): {startup:.1f} s")
        print(f"wall {wall:.1f} s: {records / wall:,.0f} events/s start-up included")
        pace = wall - startup
        if pace > 0:
            print(f"wall less start-up {pace:.1f} s: {records / pace:,.0f} events/s")
        if args.twice:
            again, _ = replay(events, base / "out2", args.parallelism, args.engine)
            different = differing(base / "out", base / "out2")
            print(f"second replay {again:.1f} s; outputs byte-identical: {not different}")
            if different:
                print(f"differ: {', '.join(different)}")
                return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
