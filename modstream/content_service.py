"""The reference Content Service: what a platform implements to receive modstream's actions.

Per content item one Redis hash `content:<content_id>` holds the current version, the applied
decision revision and the effective visibility. `apply` runs one Lua script that checks the
version fence (only the current version) and the revision fence (only a higher revision than the
applied one) and writes atomically, so any number of workers, retries and redeliveries converge
on the highest revision of the current version.

Media: an upload's bytes live in a quarantine directory; they (and what is derived from them, a
thumbnail) are exported to the public directory only while an applied action makes the version
`public` or `limited`; `hidden` and `pending` remove the export and invalidate caches.

Cache invalidation: `invalidate(content_id, paths)` is a hook (a CDN purge in production). When
it fails, the store keeps the new decision but marks the item `stale_cache`: its *effective*
visibility is still what caches serve (the previous one), which is what `content.visibility`
reports, so the reconciler sees the gap and re-applies; the next apply retries the purge.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

APPLY_SCRIPT = """
-- KEYS[1] content hash; ARGV: version, revision, visibility, restriction, ts, repair (0|1)
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
local version = tonumber(ARGV[1])
if current > 0 and version ~= current then
  return {'superseded', tostring(current), redis.call('HGET', KEYS[1], 'revision') or '0'}
end
local applied = tonumber(redis.call('HGET', KEYS[1], 'revision') or '0')
local revision = tonumber(ARGV[2])
-- A repair re-applies the revision already applied (its effect was lost); nothing older.
if revision < applied or (revision == applied and ARGV[6] ~= '1') then
  return {'stale', tostring(current), tostring(applied)}
end
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'revision', ARGV[2], 'visibility', ARGV[3],
  'restriction', ARGV[4], 'ts', ARGV[5])
redis.call('HINCRBY', KEYS[1], 'applies', 1)
return {'applied', ARGV[1], ARGV[2]}
"""

# Visibilities under which the media is exported to the public location.
EXPORTED = ("public", "limited")
# A content id used as is in a media file name; any other id (a path separator, `..`, NUL,
# unicode, over 128 characters) is named by its sha256, so no id can reach outside the media
# directories or fail the file system.
_PLAIN_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


def media_name(content_id: str, content_version: int) -> str:
    """The file name of one version's media in the quarantine and public directories."""
    if _PLAIN_ID.fullmatch(content_id):
        return f"{content_id}.v{content_version}"
    digest = hashlib.sha256(content_id.encode("utf-8", errors="surrogatepass")).hexdigest()
    return f"id-{digest}.v{content_version}"


@dataclass(frozen=True)
class Applied:
    status: str  # applied | stale | superseded
    current_version: int
    revision: int


@dataclass(frozen=True)
class Visibility:
    """What users can actually see now: a `content.visibility` record."""

    content_id: str
    content_version: int
    decision_revision: int
    visibility: str
    ts: int

    def record(self) -> dict[str, Any]:
        return {
            "content_id": self.content_id,
            "content_version": self.content_version,
            "decision_revision": self.decision_revision,
            "visibility": self.visibility,
            "ts": self.ts,
        }


def _no_cache(content_id: str, paths: list[Path]) -> None:
    """The default invalidation hook: there is no cache in front of the local store."""


class ContentService:
    def __init__(
        self,
        client: redis.Redis,
        media_dir: Path,
        *,
        invalidate: Callable[[str, list[Path]], None] = _no_cache,
        namespace: str = "content",
    ) -> None:
        self.redis: Any = client
        self.quarantine = media_dir / "quarantine"
        self.public = media_dir / "public"
        self.quarantine.mkdir(parents=True, exist_ok=True)
        self.public.mkdir(parents=True, exist_ok=True)
        self.invalidate = invalidate
        self.namespace = namespace
        self._apply = client.register_script(APPLY_SCRIPT)

    def key(self, content_id: str) -> str:
        return f"{self.namespace}:{content_id}"

    def upload(self, content_id: str, content_version: int, data: bytes, ts: int) -> Path:
        """A new version: its bytes go to quarantine; it becomes the current version, pending
        (not visible) until modstream's action for it is applied. Older versions lose their
        export at once: an edit inherits nothing."""
        path = self.quarantine / media_name(content_id, content_version)
        path.write_bytes(data)
        current = int(self.redis.hget(self.key(content_id), "version") or 0)
        if content_version > current:
            self.redis.hset(
                self.key(content_id),
                mapping={
                    "version": content_version,
                    "revision": 0,
                    "visibility": "pending",
                    "restriction": "",
                    "ts": ts,
                },
            )
            self._unexport(content_id)
        return path

    def apply(
        self,
        content_id: str,
        content_version: int,
        decision_revision: int,
        visibility: str,
        restriction: str | None,
        ts: int,
        *,
        repair: bool = False,
    ) -> Applied:
        """Apply an action behind the version and revision fences (one atomic Lua script),
        then export or withdraw the media accordingly. A `repair` (from the reconciler) may
        re-apply the revision already applied."""
        status, current, revision = self._apply(
            keys=[self.key(content_id)],
            args=[
                content_version,
                decision_revision,
                visibility,
                restriction or "",
                ts,
                1 if repair else 0,
            ],
        )
        result = Applied(_text(status), int(current), int(revision))
        if result.status == "applied":
            self._publish(content_id, content_version, visibility)
        elif self.redis.hget(self.key(content_id), "stale_cache"):
            self._publish(content_id, result.current_version, self.desired(content_id))
        return result

    def desired(self, content_id: str) -> str:
        return _text(self.redis.hget(self.key(content_id), "visibility") or b"pending")

    def _publish(self, content_id: str, content_version: int, visibility: str) -> None:
        if visibility in EXPORTED:
            source = self.quarantine / media_name(content_id, content_version)
            if source.exists():
                target = self.public / media_name(content_id, content_version)
                shutil.copyfile(source, target)
                # A derived artifact (a thumbnail in production): follows its source.
                thumb = self.public / f"{media_name(content_id, content_version)}.thumb"
                thumb.write_bytes(source.read_bytes()[:1024])
                # Remembered, so withdrawing never has to list the public directory.
                self.redis.hset(
                    self.key(content_id), "exported", json.dumps([target.name, thumb.name])
                )
            self.redis.hdel(self.key(content_id), "stale_cache")
            return
        self._unexport(content_id)

    def _unexport(self, content_id: str) -> None:
        exported, stale = self.redis.hmget(self.key(content_id), "exported", "stale_cache")
        if not exported and not stale:
            return  # nothing was exported: no cache can serve it
        # Names this service wrote; a name with a separator is not one of them.
        names = [n for n in json.loads(exported or "[]") if isinstance(n, str) and "/" not in n]
        removed = [self.public / name for name in names if name not in ("", ".", "..")]
        for path in removed:
            path.unlink(missing_ok=True)
        self.redis.hdel(self.key(content_id), "exported")
        try:
            self.invalidate(content_id, removed)
        except Exception:
            # Caches may keep serving the exported media: effectively still public.
            self.redis.hset(self.key(content_id), "stale_cache", "public")
            return
        self.redis.hdel(self.key(content_id), "stale_cache")

    def effective(self, content_id: str, ts: int) -> Visibility | None:
        """What users can see now; while a cache purge is outstanding, the exported media may
        still be served, so a withdrawn item counts as still visible (`public`)."""
        fields = {_text(k): _text(v) for k, v in self.redis.hgetall(self.key(content_id)).items()}
        if not fields:
            return None
        visibility = fields.get("stale_cache") or fields.get("visibility", "pending")
        return Visibility(
            content_id,
            int(fields.get("version", 0)),
            int(fields.get("revision", 0)),
            visibility,
            ts,
        )

    def is_exported(self, content_id: str, content_version: int) -> bool:
        return (self.public / media_name(content_id, content_version)).exists()

    def set_visibility_by_hand(self, content_id: str, visibility: str, ts: int) -> Visibility:
        """An operator's change outside modstream (for drills of the reconciler): returns the
        effective record the platform publishes on content.visibility."""
        self.redis.hset(self.key(content_id), "visibility", visibility)
        effective = self.effective(content_id, ts)
        assert effective is not None
        return effective


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
