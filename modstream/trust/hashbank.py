"""Known-bad hash banks in event time: which banks a content's sha256 or phash matches at `ts`.

Each `hash.bank` record adds or removes one hash from one bank from its own `ts` on. A phash
matches when its Hamming distance to a banked phash is at or below the policy's threshold.

Scale (issue 12, item 3: a bank of 1,000,000 entries): sha256 is a dict lookup; phash goes
through a band index (multi-index hashing). The 64-bit phash is split into `BANDS` = 8 bands
of 8 bits; two hashes within distance <= 7 differ in at most 7 bands, so by pigeonhole they
agree exactly on at least one. A query reads the 8 buckets its own bands name and verifies
those candidates by full popcount (vectorized), never the whole bank. Distances above
`PHASH_MAX_DISTANCE` are refused by policy validation (modstream/policy/document.py): the index
could not guarantee them without a scan, and a scan of a large bank per input is what this
avoids.

Duplicates need no set of event ids: an entry identical to one already held for the same hash
(`ts`, `op`, `bank`) changes nothing, so a redelivered record is a no-op. Entries of one hash
keep `ts` order, then arrival order.

Issue 27, point 7: each (bank, hash) keeps its own history, so membership in several banks and
an add followed by a remove in one bank survive each other. Persisted form: one broadcast-state
key per entry (`entry_state`: `bankentry:<hash_type>:<hash>:<ts>:<op>:<bank>` -> arrival), so an
add writes one small value however many entries its hash holds; `from_state` still reads the
layout before it (`bank:<hash_type>:<hash>` -> the hash's whole entry list). A bank holds at
most `max_entries_per_bank` entries (adds and removes); past it an add is refused (`BankFull`),
and so is a remove, unless it is the newest entry of a (bank, hash) whose newest is an add: a
full bank can still take a wrong hash out. docs/moderation.md, "Hash banks and retroaction".
"""

from __future__ import annotations

import bisect
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

BANDS = 8
BAND_BITS = 64 // BANDS
BAND_MASK = (1 << BAND_BITS) - 1
# The largest distance the band index guarantees (pigeonhole over BANDS exact bands).
PHASH_MAX_DISTANCE = BANDS - 1
STATE_PREFIX = "bank:"  # before issue 27: one key per hash, its whole entry list
ENTRY_PREFIX = "bankentry:"  # one key per entry
# Entries one bank may hold unless configured (Limits.max_bank_entries): issue 12's scale.
MAX_ENTRIES_PER_BANK = 1_000_000

# One entry of one hash: (ts, arrival, op, bank); arrival orders equal-ts entries of a hash.
Entry = tuple[int, int, str, str]


class BankFull(Exception):
    """A bank at its bound refused an entry (DLQ class `permanent`); the banks are unchanged."""


def band_values(phash: int) -> list[int]:
    """The phash's `BANDS` band values, band 0 the lowest bits."""
    return [(phash >> (BAND_BITS * band)) & BAND_MASK for band in range(BANDS)]


def state_key(hash_type: str, hash_hex: str) -> str:
    """The broadcast-state key of one banked hash: `bank:<hash_type>:<lowercase hex>`."""
    return f"{STATE_PREFIX}{hash_type}:{hash_hex.lower()}"


def entry_state(hash_type: str, hash_hex: str, entry: Entry) -> tuple[str, str]:
    """The broadcast-state (key, value) of one entry: written once, never rewritten."""
    ts, arrival, op, bank = entry
    return f"{ENTRY_PREFIX}{hash_type}:{hash_hex.lower()}:{ts}:{op}:{bank}", str(arrival)


@dataclass
class _Bucket:
    """The phashes of one (band, value), append-only, with a cached array for verification."""

    hashes: list[int] = field(default_factory=list)
    array: npt.NDArray[np.uint64] | None = None

    def values(self) -> npt.NDArray[np.uint64]:
        if self.array is None or len(self.array) != len(self.hashes):
            self.array = np.fromiter(self.hashes, dtype=np.uint64, count=len(self.hashes))
        return self.array


@dataclass
class HashBanks:
    # sha256 (32 raw bytes) or phash (int) -> entries in (ts, arrival) order
    _sha256: dict[bytes, list[Entry]] = field(default_factory=dict)
    _phash: dict[int, list[Entry]] = field(default_factory=dict)
    # band -> band value -> the banked phashes with that value in that band
    _bands: list[dict[int, _Bucket]] = field(default_factory=lambda: [{} for _ in range(BANDS)])
    max_entries_per_bank: int = MAX_ENTRIES_PER_BANK
    _held: dict[str, int] = field(default_factory=dict)  # bank -> entries held

    def __len__(self) -> int:
        """Entries held (adds and removes), all hashes together."""
        return sum(self._held.values())

    def held(self, bank: str) -> int:
        """Entries `bank` holds (adds and removes)."""
        return self._held.get(bank, 0)

    def apply(self, record: Any) -> Entry | None:
        """Apply a validated HashBankEntry: the entry now held, or None when an identical one
        already was. Raises BankFull past the bank's bound."""
        return self.add_entry(record.hash_type, record.hash, record.ts, record.op, record.bank)

    def add_entry(
        self, hash_type: str, hash_hex: str, ts: int, op: str, bank: str, *, bounded: bool = True
    ) -> Entry | None:
        """One entry for one hash, after the entries of equal or smaller `ts`: an append in
        the common case (ts order), whatever the hash holds already."""
        table, key = self._slot(hash_type, hash_hex)
        entries = table.get(key)
        if entries is None:  # the common case: a hash seen for the first time
            if bounded and self._held.get(bank, 0) >= self.max_entries_per_bank:
                self._check_bound(bank, op, ts, ())
            entry = (ts, 0, sys.intern(op), sys.intern(bank))
            table[key] = [entry]
            if hash_type == "phash":
                self._index(key)
        else:
            # Newer than every entry (ts order, the common case): no duplicate, an append.
            last = len(entries)
            if ts <= entries[-1][0]:
                first = bisect.bisect_left(entries, (ts,))
                last = bisect.bisect_left(entries, (ts + 1,), lo=first)
                if any(e[2] == op and e[3] == bank for e in entries[first:last]):
                    return None
            if bounded and self._held.get(bank, 0) >= self.max_entries_per_bank:
                self._check_bound(bank, op, ts, entries)
            # Entries are never dropped, so their count is a fresh arrival number.
            entry = (ts, len(entries), sys.intern(op), sys.intern(bank))
            if last == len(entries):
                entries.append(entry)
            else:
                entries.insert(last, entry)
        self._held[entry[3]] = self._held.get(entry[3], 0) + 1
        return entry

    def _check_bound(self, bank: str, op: str, ts: int, entries: Iterable[Entry]) -> None:
        """Raise BankFull when `bank` is at its bound, unless the entry is a remove newer than
        its (bank, hash)'s newest entry, an add (at most one such remove per held add)."""
        held = self._held.get(bank, 0)
        if held < self.max_entries_per_bank:
            return
        newest = [e for e in entries if e[3] == bank][-1:]
        if op == "remove" and newest and newest[0][2] == "add" and newest[0][0] < ts:
            return
        raise BankFull(
            f"hashbank: bank {bank!r} holds {held} entries, its bound "
            f"(max_bank_entries {self.max_entries_per_bank}); {op} refused"
        )

    @classmethod
    def from_state(
        cls, items: Iterable[tuple[str, str]], max_entries_per_bank: int = MAX_ENTRIES_PER_BANK
    ) -> HashBanks:
        """HashBanks from broadcast-state items, one key per entry (`entry_state`) or, as
        before issue 27, one per hash (`state_key`); other keys are skipped."""
        banks = cls(max_entries_per_bank=max_entries_per_bank)
        for key, value in items:
            if key.startswith(ENTRY_PREFIX):
                hash_type, hash_hex, ts, op, bank = key[len(ENTRY_PREFIX) :].split(":", 4)
                entry = (int(ts), int(value), sys.intern(op), sys.intern(bank))
                banks._restore(hash_type, hash_hex, entry)
            elif key.startswith(STATE_PREFIX):
                hash_type, hash_hex = key[len(STATE_PREFIX) :].split(":", 1)
                for ts, arrival, op, bank in json.loads(value):
                    entry = (int(ts), int(arrival), sys.intern(op), sys.intern(bank))
                    banks._restore(hash_type, hash_hex, entry)
        for table in (banks._sha256, banks._phash):
            for entries in table.values():
                if len(entries) > 1:
                    entries.sort()
        return banks

    def _restore(self, hash_type: str, hash_hex: str, entry: Entry) -> None:
        """One entry as persisted, unsorted until `from_state` ends; no bound."""
        table, key = self._slot(hash_type, hash_hex)
        entries = table.get(key)
        if entries is None:
            table[key] = [entry]
            if hash_type == "phash":
                self._index(key)
        else:
            entries.append(entry)
        self._held[entry[3]] = self._held.get(entry[3], 0) + 1

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

    def _slot(self, hash_type: str, hash_hex: str) -> tuple[dict[Any, list[Entry]], Any]:
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
