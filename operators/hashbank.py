"""Known-bad hash banks in event time: which banks a content's sha256 or phash matches at `ts`.

Each `hash.bank` record adds or removes one hash from one bank from its own `ts` on. A phash
matches when its Hamming distance to a banked phash is at or below the policy's threshold.

Scale (issue 12, item 3: a bank of 1,000,000 entries): sha256 is a dict lookup; phash goes
through a band index (multi-index hashing). The 64-bit phash is split into `BANDS` = 8 bands
of 8 bits; two hashes within distance <= 7 differ in at most 7 bands, so by pigeonhole they
agree exactly on at least one. A query reads the 8 buckets its own bands name and verifies
those candidates by full popcount (vectorized), never the whole bank. Distances above
`PHASH_MAX_DISTANCE` are refused by policy validation (operators/policy_document.py): the index
could not guarantee them without a scan, and a scan of a large bank per input is what this
avoids.

Duplicates need no set of event ids: an entry identical to one already held for the same hash
(`ts`, `op`, `bank`) changes nothing, so a redelivered record is a no-op. Entries of one hash
keep `ts` order, then arrival order. `state_entries` / `load` give the persisted form, one
broadcast-state key per hash (`state_key`), so a change rewrites one small value.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

BANDS = 8
BAND_BITS = 64 // BANDS
BAND_MASK = (1 << BAND_BITS) - 1
# The largest distance the band index guarantees (pigeonhole over BANDS exact bands).
PHASH_MAX_DISTANCE = BANDS - 1
STATE_PREFIX = "bank:"

# One entry of one hash: (ts, arrival, op, bank); arrival orders equal-ts entries of a hash.
Entry = tuple[int, int, str, str]


def band_values(phash: int) -> list[int]:
    """The phash's `BANDS` band values, band 0 the lowest bits."""
    return [(phash >> (BAND_BITS * band)) & BAND_MASK for band in range(BANDS)]


def state_key(hash_type: str, hash_hex: str) -> str:
    """The broadcast-state key of one banked hash: `bank:<hash_type>:<lowercase hex>`."""
    return f"{STATE_PREFIX}{hash_type}:{hash_hex.lower()}"


@dataclass
class _Bucket:
    """The phashes of one (band, value), append-only, with a cached array for verification."""

    hashes: list[int] = field(default_factory=list)
    array: np.ndarray | None = None

    def values(self) -> np.ndarray:
        if self.array is None or len(self.array) != len(self.hashes):
            self.array = np.fromiter(self.hashes, dtype=np.uint64, count=len(self.hashes))
        return self.array


@dataclass
class HashBanks:
    # sha256 (32 raw bytes) or phash (int) -> entries in (ts, arrival) order
    _sha256: dict[bytes, tuple[Entry, ...]] = field(default_factory=dict)
    _phash: dict[int, tuple[Entry, ...]] = field(default_factory=dict)
    # band -> band value -> the banked phashes with that value in that band
    _bands: list[dict[int, _Bucket]] = field(default_factory=lambda: [{} for _ in range(BANDS)])

    def __len__(self) -> int:
        """Entries held (adds and removes), all hashes together."""
        held = self._sha256.values(), self._phash.values()
        return sum(len(entries) for table in held for entries in table)

    def apply(self, record: Any) -> bool:
        """Apply a validated HashBankEntry; False when an identical entry is already held."""
        return self.add_entry(record.hash_type, record.hash, record.ts, record.op, record.bank)

    def add_entry(self, hash_type: str, hash_hex: str, ts: int, op: str, bank: str) -> bool:
        """One entry for one hash, after the entries of equal or smaller `ts`."""
        table, key = self._slot(hash_type, hash_hex)
        entries = table.get(key)
        if entries is None:  # the common case: a hash seen for the first time
            table[key] = ((ts, 0, sys.intern(op), sys.intern(bank)),)
            if hash_type == "phash":
                self._index(key)
            return True
        if any(e[0] == ts and e[2] == op and e[3] == bank for e in entries):
            return False
        arrival = max(e[1] for e in entries) + 1
        table[key] = tuple(sorted((*entries, (ts, arrival, sys.intern(op), sys.intern(bank)))))
        return True

    def state_entries(self, hash_type: str, hash_hex: str) -> str:
        """The persisted value of one hash's entries (JSON list of [ts, arrival, op, bank])."""
        table, key = self._slot(hash_type, hash_hex)
        return json.dumps([list(entry) for entry in table.get(key, ())], separators=(",", ":"))

    def load(self, state_key_: str, value: str) -> None:
        """Restore one persisted hash (`state_key`, `state_entries`); used once after restore."""
        hash_type, hash_hex = state_key_[len(STATE_PREFIX) :].split(":", 1)
        table, key = self._slot(hash_type, hash_hex)
        loaded = [
            (int(ts), int(n), sys.intern(op), sys.intern(bank))
            for ts, n, op, bank in json.loads(value)
        ]
        if key not in table and hash_type == "phash":
            self._index(key)
        table[key] = tuple(sorted(loaded)) if len(loaded) > 1 else tuple(loaded)

    @classmethod
    def from_state(cls, items: Iterable[tuple[str, str]]) -> HashBanks:
        """HashBanks from broadcast-state items; keys other than `bank:…` are skipped."""
        banks = cls()
        for key, value in items:
            if key.startswith(STATE_PREFIX):
                banks.load(key, value)
        return banks

    def matches(
        self, sha256: str | None, phash: str | None, ts: int, max_distance: int
    ) -> frozenset[str]:
        """The banks holding the content's sha256, or a phash within `max_distance`, at `ts`."""
        if max_distance > PHASH_MAX_DISTANCE:
            raise ValueError(
                f"hashbank: phash_max_distance {max_distance} is beyond the band index's "
                f"guarantee of {PHASH_MAX_DISTANCE}"
            )
        found: set[str] = set()
        if sha256:
            found |= _banks_at(self._sha256.get(bytes.fromhex(sha256), ()), ts)
        if phash:
            for banked in self.phash_candidates(int(phash, 16), max_distance):
                found |= _banks_at(self._phash[banked], ts)
        return frozenset(found)

    def phash_candidates(self, value: int, max_distance: int) -> set[int]:
        """Every banked phash within `max_distance` of `value` (<= PHASH_MAX_DISTANCE): the
        phashes sharing a band with it, verified by full popcount."""
        query = np.uint64(value)
        found: set[int] = set()
        for band, band_value in enumerate(band_values(value)):
            bucket = self._bands[band].get(band_value)
            if bucket is None:
                continue
            hashes = bucket.values()
            close = hashes[np.bitwise_count(hashes ^ query) <= max_distance]
            found.update(int(h) for h in close)
        return found

    def _slot(self, hash_type: str, hash_hex: str) -> tuple[dict[Any, tuple[Entry, ...]], Any]:
        """The table of `hash_type` and the hash's key in it (raw bytes or an int: compact)."""
        if hash_type == "sha256":
            return self._sha256, bytes.fromhex(hash_hex)
        if hash_type == "phash":
            return self._phash, int(hash_hex, 16)
        raise ValueError(f"hashbank: hash_type {hash_type!r} is not sha256 or phash")

    def _index(self, phash: int) -> None:
        for band, buckets in enumerate(self._bands):
            band_value = (phash >> (BAND_BITS * band)) & BAND_MASK
            bucket = buckets.get(band_value)
            if bucket is None:
                bucket = buckets[band_value] = _Bucket()
            bucket.hashes.append(phash)


def _banks_at(entries: Iterable[Entry], ts: int) -> set[str]:
    """The banks holding one hash at `ts`: its entries up to `ts`, in order."""
    banks: set[str] = set()
    for entry_ts, _, op, bank in entries:
        if entry_ts > ts:
            break
        if op == "add":
            banks.add(bank)
        else:
            banks.discard(bank)
    return banks
