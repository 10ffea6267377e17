"""The reference Content Service: what a platform implements to receive modstream's actions.

Per content item one Redis hash `content:<content_id>` holds the current version, the applied
decision revision and the decided visibility. `apply` runs one Lua script that checks the
version fence (only the current version) and the revision fence (only a higher revision than the
applied one) and writes atomically, so any number of workers, retries and redeliveries converge
on the highest revision of the current version.

Media: an upload's bytes live in a quarantine directory; they (and what is derived from them, a
thumbnail) are exported to the public directory only while the hash makes the version `public`
or `limited`. The file step is not atomic with the fence, so it is a convergence, run after
every apply (applied, stale or superseded), upload and repair: withdraw what the hash no longer
allows, then export what it allows. A crash between the fence and the file step is healed by
the retry of the same action (which the fence calls `stale`) or by the reconciler's repair.
- every export is registered in the hash (`exported`, name -> version) before its file is
  written and checked again after, so a withdrawal racing it always finds it (no lock);
- a withdrawal moves the names to a purge log (`purge`) in the same script, then deletes the
  files and calls `invalidate(content_id, paths)` (a CDN purge in production); the names leave
  the log only when a purge succeeds, so a failed purge is retried with its paths.

What users see (`effective`, reported on `content.visibility`) comes from what is served, not
from the hash alone: a public file of the item, or a pending purge (caches may serve it), is
visible; a decided `public` whose file is not exported is not (docs/enforcement.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from modstream.enforcement.apply import EXPORTED, served_visibility

LOG = logging.getLogger("modstream.content_service")

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

# A newer version becomes current and pending in one step (a read then a write raced apply).
UPLOAD_SCRIPT = """
-- KEYS[1] content hash; ARGV: version, ts
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if tonumber(ARGV[1]) <= current then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'revision', '0', 'visibility', 'pending',
  'restriction', '', 'ts', ARGV[2])
return 1
"""

# Shared by the file-step scripts: the exported names and the purge log as name -> version.
_LUA_STATE = """
local function names(raw)
  local decoded = cjson.decode(raw or '{}')
  if decoded[1] ~= nil then  -- the list an older release wrote: versions unknown
    local map = {}
    for _, name in ipairs(decoded) do map[name] = -1 end
    return map
  end
  return decoded
end
local function store(field, map)
  if next(map) == nil then redis.call('HDEL', KEYS[1], field)
  else redis.call('HSET', KEYS[1], field, cjson.encode(map)) end
end
local state = redis.call('HMGET', KEYS[1], 'version', 'visibility', 'exported', 'purge')
local current = tonumber(state[1] or '0')
local shown = state[2] == 'public' or state[2] == 'limited'
local function allowed(version) return shown and tonumber(version) == current end
local exported, purge = names(state[3]), names(state[4])
"""

# Before a file is written: register it, only while the hash allows it.
CLAIM_SCRIPT = (
    """
-- KEYS[1] content hash; ARGV: version, JSON list of names
"""
    + _LUA_STATE
    + """
if not allowed(ARGV[1]) then return 0 end
for _, name in ipairs(cjson.decode(ARGV[2])) do
  exported[name] = tonumber(ARGV[1])
  purge[name] = nil
end
store('exported', exported)
store('purge', purge)
redis.call('HSET', KEYS[1], 'served', state[2])
return 1
"""
)

# Move every exported (or found) name the hash no longer allows to the purge log; drop from
# the log what it allows again. Returns the log (name -> version) to delete and purge.
WITHDRAW_SCRIPT = (
    """
-- KEYS[1] content hash; ARGV[1]: JSON name -> version of files found in the public directory
"""
    + _LUA_STATE
    + """
for name, version in pairs(cjson.decode(ARGV[1])) do
  if exported[name] == nil then exported[name] = version end
end
for name, version in pairs(exported) do
  if not allowed(version) then
    purge[name] = version
    exported[name] = nil
  end
end
for name, version in pairs(purge) do
  if allowed(version) then purge[name] = nil end
end
store('exported', exported)
store('purge', purge)
return cjson.encode(purge)
"""
)

# A purge succeeded: its names leave the log.
PURGED_SCRIPT = (
    """
-- KEYS[1] content hash; ARGV[1]: JSON list of purged names
"""
    + _LUA_STATE
    + """
for _, name in ipairs(cjson.decode(ARGV[1])) do purge[name] = nil end
store('purge', purge)
return 1
"""
)

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


def public_names(content_id: str, content_version: int) -> list[str]:
    """The files one version has in the public directory while exported: media, thumbnail."""
    name = media_name(content_id, content_version)
    return [name, f"{name}.thumb"]


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


# The cache invalidation hook: (content_id, paths withdrawn); raising means not purged.
Purge = Callable[[str, list[Path]], None]


def _no_cache(content_id: str, paths: list[Path]) -> None:
    """The default invalidation hook: there is no cache in front of the local store."""


class ContentService:
    def __init__(
        self,
        client: redis.Redis,
        media_dir: Path,
        *,
        invalidate: Purge = _no_cache,
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
        self._upload = client.register_script(UPLOAD_SCRIPT)
        self._claim = client.register_script(CLAIM_SCRIPT)
        self._withdraw = client.register_script(WITHDRAW_SCRIPT)
        self._purged = client.register_script(PURGED_SCRIPT)

    def key(self, content_id: str) -> str:
        return f"{self.namespace}:{content_id}"

    def upload(self, content_id: str, content_version: int, data: bytes, ts: int) -> Path:
        """A new version: its bytes go to quarantine; it becomes the current version, pending
        (not visible) until modstream's action for it is applied. Older versions lose their
        export at once: an edit inherits nothing."""
        path = self.quarantine / media_name(content_id, content_version)
        path.write_bytes(data)
        self._upload(keys=[self.key(content_id)], args=[content_version, ts])
        self.converge(content_id)
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
        then make the public directory match the hash, whatever the fence said: a retry the
        fence refuses still finishes the file step a crash cut short. A `repair` (from the
        reconciler) may re-apply the revision already applied."""
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
        self.converge(content_id)
        return Applied(_text(status), int(current), int(revision))

    def desired(self, content_id: str) -> str:
        return _text(self.redis.hget(self.key(content_id), "visibility") or b"pending")

    def converge(self, content_id: str) -> None:
        """Withdraw (and purge) what the hash no longer allows, then export what it allows.
        Idempotent, and safe against a concurrent upload or apply of the same item."""
        self._take_back(content_id, self._found(content_id))
        self._export(content_id)

    def unsettled(self, content_id: str) -> bool:
        """A purge is pending, or what is served is not what the hash decided."""
        fields = self._fields(content_id)
        if not fields:
            return False
        return bool(fields.get("purge")) or self._served(content_id, fields) != fields.get(
            "visibility", "pending"
        )

    def _found(self, content_id: str) -> dict[str, int]:
        """The current version's files in the public directory, listed or not (a rolled-back
        hash may have lost their registration)."""
        version = int(self.redis.hget(self.key(content_id), "version") or 0)
        return {
            name: version
            for name in public_names(content_id, version)
            if (self.public / name).exists()
        }

    def _take_back(self, content_id: str, found: dict[str, int]) -> None:
        log = json.loads(self._withdraw(keys=[self.key(content_id)], args=[json.dumps(found)]))
        # Names this service wrote; a name with a separator is not one of them.
        names = [n for n in log if _own(n)]
        if not names:
            return
        paths = [self.public / name for name in names]
        for path in paths:
            path.unlink(missing_ok=True)
        try:
            self.invalidate(content_id, paths)
        except Exception as error:  # the purge hook is the deployment's (a CDN call)
            # The names stay in the purge log (caches may serve them) and are purged again later.
            LOG.warning("content service: cache purge failed (%s); retried", type(error).__name__)
            return
        self._purged(keys=[self.key(content_id)], args=[json.dumps(names)])

    def _export(self, content_id: str) -> None:
        version_raw, visibility = self.redis.hmget(self.key(content_id), "version", "visibility")
        version = int(version_raw or 0)
        source = self.quarantine / media_name(content_id, version)
        if _text(visibility or b"") not in EXPORTED or not source.exists():
            return
        names = public_names(content_id, version)
        if not self._claim(keys=[self.key(content_id)], args=[version, json.dumps(names)]):
            return  # the hash moved on since it was read
        media, thumb = (self.public / name for name in names)
        if not media.exists():
            self._write(media, source.read_bytes())
        if not thumb.exists():
            # A derived artifact (a thumbnail in production): follows its source.
            self._write(thumb, source.read_bytes()[:1024])
        # Checked again after writing: a hide or an upload that came meanwhile takes them back.
        self._take_back(content_id, {name: version for name in names})

    def _write(self, target: Path, data: bytes) -> None:
        """Whole or not at all: users never get half a file."""
        partial = self.quarantine / f".partial-{uuid.uuid4().hex}"
        partial.write_bytes(data)
        os.replace(partial, target)

    def _fields(self, content_id: str) -> dict[str, str]:
        return {_text(k): _text(v) for k, v in self.redis.hgetall(self.key(content_id)).items()}

    def _served(self, content_id: str, fields: dict[str, str]) -> str:
        version = int(fields.get("version", 0))
        listed = set(_map(fields.get("exported"))) | set(_map(fields.get("purge")))
        names = listed | set(public_names(content_id, version))
        return served_visibility(
            fields.get("visibility", "pending"),
            serving=any((self.public / name).exists() for name in names if _own(name)),
            purging=bool(_map(fields.get("purge"))),
            served_as=fields.get("served"),
            has_media=(self.quarantine / media_name(content_id, version)).exists(),
        )

    def effective(self, content_id: str, ts: int) -> Visibility | None:
        """What users can see now, from what is served: the public directory and the purge
        log, not only the hash (a crash between the fence and the file step, a failed purge,
        a rolled-back hash all show here)."""
        fields = self._fields(content_id)
        if not fields:
            return None
        return Visibility(
            content_id,
            int(fields.get("version", 0)),
            int(fields.get("revision", 0)),
            self._served(content_id, fields),
            ts,
        )

    def is_exported(self, content_id: str, content_version: int) -> bool:
        return (self.public / media_name(content_id, content_version)).exists()

    def set_visibility_by_hand(self, content_id: str, visibility: str, ts: int) -> Visibility:
        """An operator's change outside modstream (for drills of the reconciler), served at
        once: returns the effective record the platform publishes on content.visibility."""
        self.redis.hset(self.key(content_id), "visibility", visibility)
        self.converge(content_id)
        effective = self.effective(content_id, ts)
        assert effective is not None
        return effective


def _own(name: object) -> bool:
    return isinstance(name, str) and "/" not in name and name not in ("", ".", "..")


def _map(raw: str | None) -> dict[str, Any]:
    """`exported` or `purge` as name -> version (an older release wrote a list of names)."""
    value = json.loads(raw or "{}")
    if isinstance(value, list):
        return {name: -1 for name in value if isinstance(name, str)}
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
