"""`modstream reevaluate`: ask the moderation job to re-decide content versions on their stored
evidence under the current policy, without any new detector call.

PyFlink has no `applyToKeyedState`, so re-evaluation goes through the job's input. This command
reads `moderation.index` (compacted: one record per decided version, its latest decision and the
facts selected by, modstream/moderation/records.py `index_entry`) as a stream, and keeps only the
versions in scope: memory grows with the selection, never with the index or the decision history. It
then produces `moderation.reevaluate` records at a bounded rate, so live traffic keeps priority,
with progress on stderr (modstream/core/progress.py). Event ids are deterministic
(`reeval-<policy>-v<N>-<content>-<version>`): running it twice re-decides nothing twice (the job
drops a repeated event id). Human decisions are sticky (contract: re-evaluation cannot change them)
and deleted versions have nothing to decide: both are counted and skipped, never requested. A record
on the index that is not valid is skipped with a warning that counts it, never a crash.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any, Literal

from modstream.contract.records import decode_values
from modstream.core import kafkaio
from modstream.core.progress import Progress
from modstream.moderation.step import index_key

TimeField = Literal["decision", "upload"]
# What the selection keeps per version in scope: the policy version it was decided under
# (>= 0, selected), or why it is skipped. One small int per version: ~150 bytes with its key.
HUMAN, DELETED = -1, -2
CHUNK = 1000  # requests per producer flush: a failure loses at most this much progress


@dataclass(frozen=True)
class Selection:
    """Which versions to re-decide: those whose latest decision was made under `policy_id` at a
    version older than `policy_version`, within the optional scope. The time range is
    `[since_ts, until_ts)` on the decision's `ts` (`time_field="decision"`, the default) or on the
    upload's `ts` (`"upload"`)."""

    policy_id: str
    policy_version: int
    since_ts: int = 0
    until_ts: int | None = None
    time_field: TimeField = "decision"
    surface: str | None = None
    region: str | None = None
    modality: str | None = None


def _in_range(entry: dict[str, Any], selection: Selection) -> bool:
    if selection.since_ts <= 0 and selection.until_ts is None:
        return True
    at = entry["ts"] if selection.time_field == "decision" else entry.get("upload_ts")
    if at is None:
        return False  # no upload time known: outside any upload-time range
    return at >= selection.since_ts and (selection.until_ts is None or at < selection.until_ts)


def classify(entry: dict[str, Any], selection: Selection) -> int | None:
    """None when the version is out of scope or already decided under the policy version;
    otherwise HUMAN or DELETED (skipped) or the older policy version it was decided under."""
    if entry["policy_id"] != selection.policy_id:
        return None
    if entry["policy_version"] >= selection.policy_version:
        return None
    for field in ("surface", "region", "modality"):
        wanted = getattr(selection, field)
        if wanted is not None and entry.get(field) != wanted:
            return None
    if not _in_range(entry, selection):
        return None
    if entry["state"] == "deleted":
        return DELETED
    if entry["human"]:
        return HUMAN
    return int(entry["policy_version"])


def split_key(key: str) -> tuple[str, int]:
    """(content_id, content_version) of an index key: the version's digits come first, so the
    content id after the first ':' is whole whatever it contains."""
    version, content_id = key.split(":", 1)
    return content_id, int(version)


class Selector:
    """Selection over the index as a stream. The latest record per key wins (as compaction will
    make it): a later record out of scope removes an earlier one in scope. Memory: one entry per
    version in scope (selected or skipped), nothing for the rest of the index."""

    def __init__(self, selection: Selection) -> None:
        self.selection = selection
        self.marks: dict[str, int] = {}
        self.read = 0

    def add(self, entry: dict[str, Any]) -> None:
        self.read += 1
        key = index_key(entry["content_id"], entry["content_version"])
        mark = classify(entry, self.selection)
        if mark is None:
            self.marks.pop(key, None)
        else:
            self.marks[key] = mark

    def forget(self, key: str) -> None:
        """A tombstone: the version left the index."""
        self.marks.pop(key, None)

    def chosen(self) -> list[tuple[str, int]]:
        """The selected (content_id, content_version), in a stable order."""
        return sorted(split_key(key) for key, mark in self.marks.items() if mark >= 0)

    def counts(self) -> Counter[int]:
        return Counter(self.marks.values())


def requests(
    chosen: Iterable[tuple[str, int]], selection: Selection, ts: int
) -> Iterator[tuple[str, bytes]]:
    for content_id, content_version in chosen:
        record = {
            "event_id": f"reeval-{selection.policy_id}-v{selection.policy_version}-"
            f"{content_id}-{content_version}",
            "content_id": content_id,
            "content_version": content_version,
            "reason": f"policy {selection.policy_id} v{selection.policy_version}",
            "ts": ts,
        }
        yield content_id, json.dumps(record).encode("utf-8")


def paced(
    items: Iterable[Any],
    rate_per_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[Any]:
    """Yield at most `rate_per_s` items a second."""
    interval = 1.0 / rate_per_s
    next_at = clock()
    for item in items:
        now = clock()
        if now < next_at:
            sleep(next_at - now)
        next_at = max(now, next_at) + interval
        yield item


def scan_index(
    records: Iterable[Any], selection: Selection, warn: Callable[[str], None]
) -> Selector:
    """Feed the index's records, one at a time, to a Selector; count what is not valid."""
    selector = Selector(selection)
    skipped = total = 0
    for record in records:
        total += 1
        if record.value is None:
            if record.key is not None:
                selector.forget(record.key.decode("utf-8", "replace"))
            continue
        values, bad = decode_values((record,), "moderation.index")
        skipped += bad
        for value in values:
            selector.add(value)
    if skipped:
        warn(f"moderation.index: skipped {skipped} malformed record(s) of {total}")
    return selector


def summary(selector: Selector, sample: int) -> list[str]:
    """What was selected, by the policy version it was decided under, what was skipped and why,
    and the first `sample` versions that will be requested."""
    selection, counts, chosen = selector.selection, selector.counts(), selector.chosen()
    older = ", ".join(f"v{v}: {n}" for v, n in sorted(counts.items()) if v >= 0)
    lines = [
        f"reevaluate: {len(chosen)} content version(s) decided before {selection.policy_id} "
        f"v{selection.policy_version}"
        + (f" ({older})" if older else "")
        + f", from {selector.read} index record(s)",
        f"reevaluate: skipped {counts[HUMAN]} human decision(s) (sticky: re-evaluation cannot "
        f"change them) and {counts[DELETED]} deleted version(s)",
    ]
    lines += [f"reevaluate:   {cid} v{ver}" for cid, ver in chosen[:sample]]
    return lines


def _produce(bootstrap: str, topic: str, items: Iterator[tuple[str, bytes]]) -> int:
    """Produce in chunks, each acknowledged before the next: bounded memory, and a failure
    stops at a chunk boundary (running again is safe: event ids are deterministic)."""
    sent = 0
    while chunk := list(islice(items, CHUNK)):
        sent += kafkaio.produce(bootstrap, topic, chunk)
    return sent


def run(
    bootstrap: str,
    selection: Selection,
    *,
    rate_per_s: float,
    ts: int,
    index_topic: str = "moderation.index",
    target_topic: str = "moderation.reevaluate",
    dry_run: bool = False,
    sample: int = 10,
    read_timeout_s: float = 3600.0,
    say: Callable[[str], None] = print,
    progress_every_s: float = 5.0,
) -> int:
    """Select from the index, then produce the requests, paced; progress on stderr
    (modstream/core/progress.py) while reading and while producing."""

    def warn(text: str) -> None:
        say(f"reevaluate: {text}")

    with Progress("reevaluate", every_s=progress_every_s) as shown:
        shown.phase(f"reading {index_topic}", unit="records")
        records = kafkaio.iter_to_end(bootstrap, index_topic, timeout_s=read_timeout_s)
        selector = scan_index(shown.track(records), selection, warn)
        for line in summary(selector, sample if dry_run else 0):
            say(line)
        chosen = selector.chosen()
        if dry_run or not chosen:
            return 0
        del selector  # the sorted selection is all that production needs
        shown.phase(f"producing to {target_topic}", total=len(chosen), unit="requests")
        started = time.monotonic()
        items = shown.track(paced(requests(chosen, selection, ts), rate_per_s))
        sent = _produce(bootstrap, target_topic, items)
        elapsed = time.monotonic() - started
    say(
        f"reevaluate: produced {sent} request(s) to {target_topic} in {elapsed:.1f}s "
        f"({sent / elapsed if elapsed > 0 else 0:.1f}/s, at most {rate_per_s:g}/s)"
    )
    return 0
