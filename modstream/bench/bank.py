"""Hash banks at 1,000,000 entries: load, apply and match cost of modstream/trust/hashbank.py.

    python -m modstream.bench.bank --entries 1000000 --queries 20000

Loads `--entries` bank additions (half sha256, half phash, in 4 banks, random hashes from a
fixed seed) into HashBanks record by record, as the moderation operator applies `hash.bank`
records; then rebuilds it from its persisted form (one broadcast-state value per entry, the
restore path); then adds `--hot` entries to one hash in as many banks (an add must cost the
same however many entries its hash holds); then matches `--queries` inputs (a sha256 and a
phash each, half of them near a banked phash) at the policy distance. Prints load seconds,
µs per apply, µs per add to the hot hash, µs per matched input and the process's RSS.
Figures go to docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import random
import resource
import time
from dataclasses import dataclass

from modstream.trust.hashbank import PHASH_MAX_DISTANCE, HashBanks, entry_state

BANKS = ("known_bad", "known_csam", "spam_kit", "partner_feed")


@dataclass(frozen=True)
class Entry:
    """The fields of a validated HashBankEntry that HashBanks reads."""

    hash_type: str
    hash: str
    ts: int
    op: str
    bank: str


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def entries(count: int, rng: random.Random) -> list[Entry]:
    made = []
    for index in range(count):
        bank = BANKS[index % len(BANKS)]
        if index % 2:
            made.append(Entry("phash", f"{rng.getrandbits(64):016x}", index, "add", bank))
        else:
            made.append(Entry("sha256", f"{rng.getrandbits(256):064x}", index, "add", bank))
    return made


def hot_add_us(banks: HashBanks, first: Entry, count: int) -> None:
    """Adds to one hash in many banks, in ts order: the first and the last thousand cost the
    same when an add neither rewrites nor rescans its hash's entries."""
    costs = []
    for index in range(count):
        record = Entry(first.hash_type, first.hash, first.ts + 1 + index, "add", f"hot-{index}")
        started = time.perf_counter()
        banks.apply(record)
        costs.append(time.perf_counter() - started)
    chunk = min(1000, count // 2)
    head, tail = sum(costs[:chunk]) / chunk * 1e6, sum(costs[-chunk:]) / chunk * 1e6
    print(f"hot hash: {count:,} adds to one hash, {head:.1f} µs per add first, {tail:.1f} last")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--distance", type=int, default=6, help="policy phash_max_distance")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--hot", type=int, default=20_000, help="adds to one hash")
    args = parser.parse_args(argv)
    assert args.distance <= PHASH_MAX_DISTANCE
    rng = random.Random(args.seed)
    base = rss_mb()
    records = entries(args.entries, rng)
    made = rss_mb()
    banks = HashBanks(max_entries_per_bank=args.entries)
    started = time.perf_counter()
    held = [banks.apply(record) for record in records]
    load_s = time.perf_counter() - started
    grown = rss_mb() - made
    print(f"bank: {len(banks):,} entries ({args.entries // 2:,} sha256, phash the rest)")
    print(f"apply: {load_s:.1f} s to load, {load_s / args.entries * 1e6:.1f} µs per entry")
    print(
        f"memory: {grown:.0f} MB RSS for the bank ({rss_mb():.0f} MB process, {base:.0f} at start)"
    )

    state = [
        entry_state(r.hash_type, r.hash, entry)
        for r, entry in zip(records, held, strict=True)
        if entry is not None
    ]
    del held
    started = time.perf_counter()
    restored = HashBanks.from_state(state)
    restore_s = time.perf_counter() - started
    assert len(restored) == len(banks)
    del restored, state
    print(f"restore: {restore_s:.1f} s from the persisted form (one broadcast-state key per entry)")
    hot_add_us(banks, records[0], args.hot)

    phashes = [int(r.hash, 16) for r in records if r.hash_type == "phash"]
    shas = [r.hash for r in records if r.hash_type == "sha256"]
    queries = []
    for index in range(args.queries):
        near = index % 2 == 0
        phash = rng.choice(phashes) ^ (1 << rng.randrange(64)) if near else rng.getrandbits(64)
        sha = rng.choice(shas) if index % 4 == 0 else f"{rng.getrandbits(256):064x}"
        queries.append((sha, f"{phash:016x}"))
    banks.matches(*queries[0], args.entries, args.distance)  # warm the verification arrays
    started = time.perf_counter()
    hits = sum(
        bool(banks.matches(sha, phash, args.entries, args.distance)) for sha, phash in queries
    )
    match_s = time.perf_counter() - started
    print(
        f"match: {match_s / args.queries * 1e6:.0f} µs per input (sha256 + phash at distance "
        f"{args.distance}), {args.queries:,} inputs, {hits:,} matched"
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"rss: {rss_mb():.0f} MB, peak {peak:.0f} MB (the restore held a second copy)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
