"""Ids derived from what they name: the same parts give the same id, so a record emitted again
(a replay, a redelivery, a restore) keeps its id and downstream deduplication holds.

One digest for every such id (scan requests, review tasks, second-review samples, strikes): the
parts joined with `|`, SHA-256, hex.
"""

from __future__ import annotations

import hashlib


def sha256_hex(*parts: object) -> str:
    """The hex SHA-256 of `parts` as text joined with `|`."""
    return hashlib.sha256("|".join(map(str, parts)).encode("utf-8")).hexdigest()
