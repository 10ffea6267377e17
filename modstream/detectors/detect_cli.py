"""`modstream detect --detector NAME --input FILE.jsonl`: one `{"text": …}` or `{"path": …}` a
line in, one detector.results-shaped JSON a line out (status `error` for undecodable media);
exit 0 however many items fail."""

from __future__ import annotations

import hashlib
import json
import mimetypes
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from modstream.core.limits import Limits
from modstream.detectors.detector import Evidence, Item, MediaError
from modstream.detectors.media import read_media
from modstream.detectors.registry import detector

BATCH = 32


def _items(
    lines: Iterator[str], limits: Limits
) -> Iterator[tuple[int, Item | MediaError, dict[str, Any]]]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            yield number, MediaError("line is not JSON"), {}
            continue
        if isinstance(entry, dict) and isinstance(entry.get("text"), str):
            yield number, Item(text=entry["text"], mime_type="text/plain"), entry
        elif isinstance(entry, dict) and isinstance(entry.get("path"), str):
            path = Path(entry["path"])
            try:  # a regular file within the media bounds (never /dev/zero or a FIFO)
                data = read_media(path.absolute().as_uri(), Path("/"), limits)
            except MediaError as error:
                yield number, error, entry
                continue
            except (OSError, ValueError) as error:
                yield number, MediaError(f"cannot read ({type(error).__name__})"), entry
                continue
            mime = entry.get("mime_type") or mimetypes.guess_type(path.name)[0]
            yield number, Item(data=data, mime_type=mime, ref=path.as_uri()), entry
        else:
            yield number, MediaError('expected {"text": …} or {"path": …}'), {}


def run(name: str, input_path: Path, say: Callable[[str], None] = print) -> int:
    limits = Limits.from_env()
    scanner = detector(name, limits=limits)
    with open(input_path, encoding="utf-8") as handle:
        pending: list[tuple[int, Item | MediaError, dict[str, Any]]] = []

        def flush() -> None:
            items = [item for _, item, _ in pending if isinstance(item, Item)]
            scored = iter(scanner.detect(items)) if items else iter(())
            for number, item, entry in pending:
                result = next(scored) if isinstance(item, Item) else item
                say(json.dumps(_record(name, scanner.model_version, number, entry, result)))
            pending.clear()

        for entry in _items(iter(handle), limits):
            pending.append(entry)
            if len(pending) >= BATCH:
                flush()
        flush()
    return 0


def _record(
    name: str, model_version: str, number: int, entry: dict[str, Any], result: Any
) -> dict[str, Any]:
    source = entry.get("path") or entry.get("text") or str(number)
    content_id = entry.get("content_id") or hashlib.sha256(source.encode()).hexdigest()[:16]
    record: dict[str, Any] = {
        "event_id": f"detect-{name}-{content_id}-{number}",
        "content_id": content_id,
        "content_version": int(entry.get("content_version") or 1),
        "detector": name,
        "model_version": model_version,
        "segment_id": entry.get("segment_id"),
        "ts": int(time.time() * 1000),
    }
    if isinstance(result, MediaError):
        record["status"] = "error"
    elif isinstance(result, Evidence):
        record["status"] = "ok"
        record["scores"] = result.scores
        if result.findings:
            record["findings"] = list(result.findings)
    else:
        record["status"] = "ok"
        record["scores"] = result
    if entry.get("path"):
        record["evidence_ref"] = Path(entry["path"]).resolve().as_uri()
    return record
