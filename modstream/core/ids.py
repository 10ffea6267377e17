"""Ids derived from what they name: the same parts give the same id, so a record emitted again
(a replay, a redelivery, a restore) keeps its id and downstream deduplication holds.

One digest for every such id (scan requests, review tasks, second-review samples, strikes): the
parts joined with `|`, SHA-256, hex.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable
from typing import Any, Final


def _plain_sha256() -> Callable[[bytes], Any]:
    """CPython's own SHA-256 (`_sha256`; `_sha2` from 3.12) where the interpreter has it, else
    hashlib's. hashlib's is OpenSSL's, which looks its algorithm up again at every call (OpenSSL
    3's `EVP_MD_fetch`): about 6,100 instructions for a short id against 4,500 (callgrind), and
    the per-version code hashes two to three ids per event. Both give the same digest."""
    for module in ("_sha256", "_sha2"):
        try:
            made: Callable[[bytes], Any] = importlib.import_module(module).sha256
        except (ImportError, AttributeError):
            continue
        return made
    return hashlib.sha256


SHA256: Final = _plain_sha256()


def sha256_hex(*parts: object) -> str:
    """The hex SHA-256 of `parts` as text joined with `|`. The parts are made text in a list
    (compiled: a `str` part is taken as it is) rather than by `map(str, ...)`, which the join
    must first turn into a sequence through Python's iterator protocol: about 0.4 µs of an
    id's 1.0 (issue 26)."""
    text = "|".join([part if isinstance(part, str) else str(part) for part in parts])
    return str(SHA256(text.encode("utf-8")).hexdigest())
