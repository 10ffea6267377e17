"""The per-version code's instructions per event, counted by valgrind (callgrind): `make
bench-instructions`. The same workload as `make bench-step` (modstream/bench/step.py), each
phase in its own process under callgrind, counting only inside the phase's compiled entry:
- admit: `modstream.moderation.admission.admit` for every record;
- apply: `Moderate.apply` for every event and timer (the pure step, its policy evaluation, the
  state read and written);
- fire: `BatchedModerate.fire`, the step as the job runs it (apply plus the adapter).

Why instructions and not time: the 2-core machine's speed moves by ±30% within a minute (docs/
BENCHMARKS.md, "Comparing two builds on a noisy machine"), so two builds timed one after the other
differ by more than most changes do. A count of the instructions executed does not move with
the machine: the same build gives the same count from one shell, and within about 1% from
another environment (object addresses, which some hashes use, move with it). It is a
proxy (a cache miss costs more than an add), so it compares builds of the same code; the µs of
`make bench-step` remain the figures of record.

Counts only the compiled build (`make native`): the entries are found by their C symbols.
Prints one JSON line: instructions per event for each phase, the events, the build.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

# Each phase's entry, as mypyc names its C function (`CPyDef_<module>___<name>`), as callgrind's
# --toggle-collect matches it: counting starts on entering it and stops on leaving it.
ENTRIES = {
    "admit": "CPyDef_admission___admit",
    "apply": "CPyDef_moderate___apply_Moderate_obj_____call__",
    "fire": "CPyDef_batch___BatchedModerate___fire",
}
_COLLECTED = re.compile(r"Collected : (\d+)")


def run_phase(phase: str) -> int:
    """Run one phase over the bench workload in this process (what callgrind watches); the
    number of events it handled."""
    from modstream.bench.compare import step_engine
    from modstream.bench.fire import FIRE_STEP_MS, NOW_MS, Driver, keyed_rows
    from modstream.bench.step import workload

    records, until = workload()
    if phase == "fire":
        config = step_engine(now_ms=NOW_MS).config
        Driver(config).run(keyed_rows(config, records), until, FIRE_STEP_MS)
        return len(records)
    engine = step_engine(now_ms=NOW_MS)
    for topic, raw in records:
        engine.admit(topic, raw, topic, 0)
    if phase == "apply":
        sum(1 for _ in engine.drain(until))
    return len(records)


def count(phase: str, workdir: Path) -> dict[str, Any]:
    """Instructions inside the phase's entry, from callgrind's summary, and the events."""
    out = workdir / f"{phase}.callgrind"
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--toggle-collect={ENTRIES[phase]}",
        f"--callgrind-out-file={out}",
        sys.executable,
        "-m",
        "modstream.bench.instructions",
        "--phase",
        phase,
    ]
    # One hash seed: a dict or set of strings then iterates alike in every run, and so counts.
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    collected = _COLLECTED.findall(done.stderr)
    if done.returncode != 0 or not collected:
        raise SystemExit(f"bench-instructions: {phase} failed:\n{done.stderr[-2000:]}")
    events = json.loads(done.stdout.strip().splitlines()[-1])["events"]
    return {"instructions": int(collected[-1]), "events": events}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--phase", choices=sorted(ENTRIES), help="run one phase (callgrind's child)"
    )
    args = parser.parse_args(argv)
    if args.phase:
        print(json.dumps({"events": run_phase(args.phase)}))
        return 0
    from modstream.core import native

    if native.in_use() != "compiled":
        print("bench-instructions: counts the compiled build only; run `make native`")
        return 2
    if shutil.which("valgrind") is None:
        print(
            "bench-instructions: valgrind is not installed (`make bench-instructions` installs it)"
        )
        return 2
    print("bench-instructions: admit, apply and fire under callgrind (about 3 minutes)", flush=True)
    with tempfile.TemporaryDirectory() as workdir, ThreadPoolExecutor(2) as pool:
        phases = list(ENTRIES)
        figures = pool.map(lambda phase: count(phase, Path(workdir)), phases)
        counted = dict(zip(phases, figures, strict=True))
    result: dict[str, Any] = {"events": counted["admit"]["events"], "build": "compiled"}
    for phase, counts in counted.items():
        result[f"{phase}_instructions_per_event"] = round(counts["instructions"] / counts["events"])
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
