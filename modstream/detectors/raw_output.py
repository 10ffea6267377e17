"""Raw detector output kept as evidence (issue 28 item 5): a file per result, never in a decision.

A reviewer or an auditor may need what the model itself said, not only the scores the adapter
made of it: the lines OCR read with their boxes, the transcript of each utterance, the model's
own output. The scan job (`--raw-output-dir`) writes it, one JSON file per `ok` result, and the
result carries `raw_output_ref` (`raw://<day>/<name>`; docs/contract-notes.md, "Raw output");
decisions cite results, never the raw output. It holds content (the words read or heard), so:
- access: the directory tree is mode 0700 and each file 0600, created so (no window with wider
  modes, whatever the umask), owned by the scan job's user; a symlink in its place is refused;
- retention (docs/retention.md): files sit in a folder per UTC day of the result's event time
  and a day's folder is deleted once it is older than `retention_ms` (30 days: as long as the
  decisions that cite the results, for appeals and audits); the job deletes them as it writes
  (the first write of each day purges), and `purge` deletes them when called;
- a file's name is a digest of the result's `event_id`, so a result made again after a restore
  writes the same file (its content the same detector's answer);
- the review console reads it (`read_kept`, for the reviewer of the version: docs/REVIEW.md)
  without changing the store: no directory made, no mode changed, a link never followed.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

RETENTION_MS = 30 * 86_400_000
DAY_MS = 86_400_000
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
SCHEME = "raw://"
MAX_READ_BYTES = 4 << 20  # a kept file the console reads: readings of one result, bounded


def _day(ts: int) -> str:
    return datetime.datetime.fromtimestamp(ts / 1000, tz=datetime.UTC).strftime("%Y-%m-%d")


class RawOutputStore:
    """The raw outputs under `root`: `keep` one result's, `purge` the expired days."""

    def __init__(self, root: Path | str, retention_ms: int = RETENTION_MS) -> None:
        self.root = Path(root)
        self.retention_ms = retention_ms
        self._private(self.root)
        self._purged: set[str] = set()

    def keep(self, result: dict[str, Any], raw: Any) -> str:
        """Write `raw` for `result` (its `event_id`, `detector`, `model_version`, `ts`); the
        reference that names the file."""
        day = _day(int(result["ts"]))
        if day not in self._purged:
            self._purged.add(day)
            self.purge(int(result["ts"]))
        folder = self.root / day
        self._private(folder)
        name = hashlib.sha256(str(result["event_id"]).encode()).hexdigest()[:32] + ".json"
        body = {
            "event_id": result["event_id"],
            "detector": result["detector"],
            "model_version": result["model_version"],
            "raw": raw,
        }
        fd = os.open(folder / name, _FLAGS, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, json.dumps(body, ensure_ascii=False, default=float).encode("utf-8"))
        finally:
            os.close(fd)
        return f"{SCHEME}{day}/{name}"

    def path(self, ref: str) -> Path:
        """The file a reference names (inside `root`, or a ValueError)."""
        return kept_path(self.root, ref)

    def purge(self, now_ms: int) -> int:
        """Delete every day folder that ended more than `retention_ms` before `now_ms`; how
        many were deleted."""
        deleted = 0
        for folder in self.root.iterdir():
            start = _day_ms(folder.name)
            if start is None or folder.is_symlink() or not folder.is_dir():
                continue
            if start + DAY_MS + self.retention_ms <= now_ms:
                shutil.rmtree(folder)
                deleted += 1
        return deleted

    @staticmethod
    def _private(folder: Path) -> None:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if folder.is_symlink():
            raise ValueError(f"raw output: {folder.name} is a symlink")
        os.chmod(folder, 0o700)


def kept_path(root: Path, ref: str) -> Path:
    """The file a `raw://<day>/<name>.json` reference names under `root`, or a ValueError."""
    if not ref.startswith(SCHEME):
        raise ValueError("raw_output_ref: not a raw:// reference")
    day, _, name = ref[len(SCHEME) :].partition("/")
    if _day_ms(day) is None or not name.endswith(".json") or "/" in name or ".." in name:
        raise ValueError("raw_output_ref: not a day and a file name")
    return root / day / name


def read_kept(root: Path, ref: str, max_bytes: int = MAX_READ_BYTES) -> dict[str, Any]:
    """The body `keep` wrote for `ref` (`event_id`, `detector`, `model_version`, `raw`), read
    without following a link (the day folder nor the file) and at most `max_bytes`: ValueError
    for a reference or file that is not the store's, OSError for ordinary I/O failures (a file
    the retention already deleted: FileNotFoundError)."""
    path = kept_path(root, ref)
    if path.parent.is_symlink():
        raise ValueError(f"raw output: {path.parent.name} is a symlink")
    fd = os.open(path, _READ_FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("raw output: not a regular file")
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise ValueError(f"raw output: more than {max_bytes} bytes")
    body = json.loads(data)
    if not isinstance(body, dict):
        raise ValueError("raw output: not a JSON object")
    return body


@functools.lru_cache(maxsize=4)
def store_at(directory: str) -> RawOutputStore:
    """One store per directory in a process (the scan job's model workers share it)."""
    return RawOutputStore(directory)


def _day_ms(name: str) -> int | None:
    try:
        day = datetime.datetime.strptime(name, "%Y-%m-%d").replace(tzinfo=datetime.UTC)
    except ValueError:
        return None
    return int(day.timestamp() * 1000)
