"""Count what the moderation job does with fuzzed records of every class.

    .venv/bin/python -m modstream.testing.fuzz.census [--count N] [--seed S] [--markdown]

Generates N records per class (spread over the input topics the class applies to) with fixed
seeds (modstream/testing/fuzz/strategies.py), sends each through the job's own adapters as the
Kafka source delivers it (modstream/testing/fuzz/pipeline.py: decode, broadcast, report gate,
moderate, sanctions), and
prints one row per class: tried, accepted, dead-lettered by error_class, crashed (must be 0),
and `unexpected`: records whose outcome differs from what the contract asks (a valid record
refused, a hostile one accepted, a class other than expected, more than one DLQ row, or any
other output changed). Exits 1 when anything crashed or was unexpected.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

from modstream.contract import parse
from modstream.contract.dlq import ErrorClass
from modstream.testing.fuzz.pipeline import Outcome, run_one
from modstream.testing.fuzz.strategies import KINDS, MUTATIONS, Fuzzed, applicable, fuzzed, sample

ERROR_CLASSES: tuple[str, ...] = ErrorClass.__args__  # type: ignore[attr-defined]


@dataclass
class Row:
    """One class's counts."""

    name: str
    tried: int = 0
    accepted: int = 0
    dead_lettered: Counter[str] = field(default_factory=Counter)
    crashed: int = 0
    unexpected: int = 0
    examples: list[str] = field(default_factory=list)  # the first few unexpected ones


def expected_outcome(fuzz: Fuzzed, outcome: Outcome) -> str | None:
    """Why `outcome` is not what the contract asks for `fuzz`, or None."""
    expected = fuzz.expected_class
    if expected is None:
        if outcome.letters:
            return f"valid record refused: {outcome.letters[0]['message'][:160]}"
        for topic, _, value in outcome.outputs:
            try:
                parse(topic, json.dumps(value))
            except ValueError as error:
                return f"off-contract {topic}: {str(error)[:160]}"
        return None
    if not outcome.letters:
        return "hostile record accepted"
    if len(outcome.letters) > 1:
        return f"{len(outcome.letters)} DLQ rows"
    if outcome.letters[0]["error_class"] != expected:
        return f"class {outcome.letters[0]['error_class']}, expected {expected}"
    if outcome.outputs != outcome.baseline:
        return "other outputs changed"
    return None


def census(count: int, seed: int) -> list[Row]:
    rows = []
    for mutation in MUTATIONS:
        row = Row(mutation)
        kinds = [kind for kind in KINDS if applicable(kind, mutation)]
        for index, kind in enumerate(kinds):
            share = count // len(kinds) + (1 if index < count % len(kinds) else 0)
            for fuzz in sample(fuzzed(kind, mutation), share, seed + index):
                outcome = run_one(fuzz.topic, fuzz.text, fuzz.record)
                row.tried += 1
                if outcome.crashed is not None:
                    row.crashed += 1
                    problem: str | None = f"crashed: {outcome.crashed!r}"[:200]
                elif outcome.letters:
                    row.dead_lettered[outcome.letters[0]["error_class"]] += 1
                    problem = expected_outcome(fuzz, outcome)
                else:
                    row.accepted += 1
                    problem = expected_outcome(fuzz, outcome)
                if problem is not None:
                    row.unexpected += 1
                    if len(row.examples) < 3:
                        row.examples.append(f"{kind} ({fuzz.note}): {problem}")
        rows.append(row)
        print(f"census: {mutation}: {row.tried} tried", file=sys.stderr, flush=True)
    return rows


def table(rows: list[Row]) -> str:
    classes = [name for name in ERROR_CLASSES if any(row.dead_lettered[name] for row in rows)]
    header = ["class", "tried", "accepted", *(f"DLQ {name}" for name in classes)]
    header += ["crashed", "unexpected"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    total = Row("total")
    for row in [*rows, total]:
        if row is not total:
            total.tried += row.tried
            total.accepted += row.accepted
            total.dead_lettered.update(row.dead_lettered)
            total.crashed += row.crashed
            total.unexpected += row.unexpected
        cells = [row.name, row.tried, row.accepted, *(row.dead_lettered[c] for c in classes)]
        cells += [row.crashed, row.unexpected]
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m modstream.testing.fuzz.census", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--count", type=int, default=200, help="records per class (200)")
    parser.add_argument("--seed", type=int, default=11, help="first Hypothesis seed (11)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    print(
        f"census: {args.count} records per class, {len(MUTATIONS)} classes, seed {args.seed}",
        file=sys.stderr,
    )
    rows = census(args.count, args.seed)
    print(table(rows))
    for row in rows:
        for example in row.examples:
            print(f"unexpected, {row.name}: {example}")
    elapsed = time.monotonic() - started
    print(f"census: done in {elapsed:.0f} s", file=sys.stderr)
    return 1 if any(row.crashed or row.unexpected for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
