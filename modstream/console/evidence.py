"""How a task's evidence is shown: which references the server renders as images, and the
access-log records of what a reviewer saw. Pure: the bytes are read by the service.

Evidence references are what the detectors reported (`evidence_ref`): a `file://` reference
inside the media store is served by the console itself (`/tasks/<id>/evidence/<n>`, after the
same checks as every task request), never linked: the store has no public URL, and a reference
outside it (or any other scheme) is shown as text only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlparse

from modstream.review.queue import event_id

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp"})


@dataclass(frozen=True)
class EvidenceItem:
    """One reference of a task, as the page shows it: an image the server serves, or text."""

    index: int
    ref: str
    image: bool


def evidence_items(task: Mapping[str, Any]) -> list[EvidenceItem]:
    """The task's evidence references in order, each once (the detectors of one upload name
    the same file); `file://` images are served by the console (the service reads them only
    from inside the media store). `index` is the reference's place in the task."""
    items, seen = [], set()
    for index, ref in enumerate(task.get("evidence") or []):
        if ref in seen:
            continue
        seen.add(ref)
        parsed = urlparse(str(ref))
        suffix = PurePosixPath(parsed.path).suffix.lower()
        items.append(
            EvidenceItem(index, str(ref), parsed.scheme == "file" and suffix in IMAGE_SUFFIXES)
        )
    return items


def access_record(
    reviewer_id: str,
    action: str,
    ts: int,
    task: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A review.access record (modstream/contract/review.py `ReviewAccess`): who did what, when, to
    which task; `extra` adds `evidence_ref`, `outcome`, `note`, `detail`, `queue`."""
    record: dict[str, Any] = {"reviewer_id": reviewer_id, "action": action, "ts": ts}
    if task is not None:
        record.update(
            task_id=task["task_id"],
            queue=task["queue"],
            content_id=task["content_id"],
            content_version=task["content_version"],
        )
    record.update({key: value for key, value in extra.items() if value not in (None, "")})
    part = extra.get("evidence_ref") or record.get("task_id") or record.get("queue") or ""
    record["event_id"] = event_id("access", reviewer_id, action, part, ts)
    return record
