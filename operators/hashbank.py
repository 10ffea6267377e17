"""Known-bad hash banks in event time: which banks a content's sha256 or phash matches at `ts`.

Each `hash.bank` record adds or removes one hash from one bank from its own `ts` on. A phash
matches when its Hamming distance to a banked phash is at or below the policy's threshold.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class HashBanks:
    # (hash_type, lowercase hash) -> sorted [(ts, sequence, op, bank)]
    _entries: dict[tuple[str, str], list[tuple[int, int, str, str]]] = field(default_factory=dict)
    _seen: set[str] = field(default_factory=set)
    _sequence: int = 0

    def apply(self, record: Any) -> bool:
        """Apply a validated HashBankEntry; False for a duplicate event_id."""
        if record.event_id in self._seen:
            return False
        self._seen.add(record.event_id)
        self._sequence += 1
        key = (record.hash_type, record.hash.lower())
        insort(
            self._entries.setdefault(key, []), (record.ts, self._sequence, record.op, record.bank)
        )
        return True

    def _banks_at(self, key: tuple[str, str], ts: int) -> set[str]:
        banks: set[str] = set()
        for entry_ts, _, op, bank in self._entries.get(key, ()):
            if entry_ts > ts:
                break
            if op == "add":
                banks.add(bank)
            else:
                banks.discard(bank)
        return banks

    def matches(
        self, sha256: str | None, phash: str | None, ts: int, max_distance: int
    ) -> frozenset[str]:
        found: set[str] = set()
        if sha256:
            found |= self._banks_at(("sha256", sha256.lower()), ts)
        if phash:
            value = int(phash, 16)
            for (hash_type, banked), _ in self._entries.items():
                if hash_type == "phash" and (int(banked, 16) ^ value).bit_count() <= max_distance:
                    found |= self._banks_at(("phash", banked), ts)
        return frozenset(found)

    def to_records(self) -> list[dict[str, Any]]:
        out = []
        for (hash_type, value), entries in self._entries.items():
            for ts, sequence, op, bank in entries:
                out.append(
                    {
                        "hash_type": hash_type,
                        "hash": value,
                        "ts": ts,
                        "seq": sequence,
                        "op": op,
                        "bank": bank,
                    }
                )
        return sorted(out, key=lambda r: r["seq"])

    @classmethod
    def from_records(cls, records: Iterable[dict[str, Any]], seen: Iterable[str] = ()) -> HashBanks:
        banks = cls()
        for r in records:
            banks._sequence = max(banks._sequence, r["seq"])
            insort(
                banks._entries.setdefault((r["hash_type"], r["hash"]), []),
                (r["ts"], r["seq"], r["op"], r["bank"]),
            )
        banks._seen = set(seen)
        return banks
