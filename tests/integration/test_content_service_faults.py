"""The Content Service's windows on real Redis and real files: a crash between the fence and the
file step, a failed purge, an upload or a newer action racing an apply, a rolled-back Redis hash.
Each case ends with what is served (the public directory and the purge log) matching the
decision; interleavings are forced at the one point between the fence and the file step."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from modstream.core.config import Settings
from modstream.enforcement import apply as enforcement
from modstream.enforcement.content_service import APPLY_SCRIPT, ContentService
from modstream.jobs.reconciler import Reconcile, ReconcilerConfig
from modstream.testing.enforcement import content_action as action
from modstream.testing.flink import ProcessingContext as FakeContext
from modstream.testing.flink import ReconcilerRuntimeContext as FakeRuntimeContext
from modstream.testing.records import T0

pytestmark = pytest.mark.integration


class AfterFence:
    """The real Redis client, with one interleaving point: right after the apply script (the
    fence) has committed and before the file step runs. Every command goes to Redis."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.hook: Callable[[], None] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def register_script(self, source: str) -> Any:
        script = self.client.register_script(source)
        if source != APPLY_SCRIPT:
            return script

        def run(*args: Any, **kwargs: Any) -> Any:
            result = script(*args, **kwargs)
            hook, self.hook = self.hook, None
            if hook is not None:
                hook()
            return result

        return run


@pytest.fixture
def client(stack: Settings) -> redis.Redis:
    return redis.Redis.from_url(stack.redis_url)


def services(
    client: redis.Redis, media: Path, invalidate: Any = None
) -> tuple[ContentService, ContentService, AfterFence]:
    """Two workers of one Content Service: the first with the interleaving point."""
    namespace = f"it-{uuid.uuid4().hex[:8]}"
    hooked = AfterFence(client)
    extra = {"invalidate": invalidate} if invalidate else {}
    first = ContentService(hooked, media, namespace=namespace, **extra)  # type: ignore[arg-type]
    second = ContentService(client, media, namespace=namespace, **extra)
    return first, second, hooked


def public_files(media: Path) -> list[str]:
    return sorted(path.name for path in (media / "public").iterdir())


class Crash(Exception):
    """The worker dies between the fence and the file step."""


def crash() -> None:
    raise Crash


def test_a_crash_after_the_fence_is_seen_and_the_retry_withdraws_the_file(
    client: redis.Redis, tmp_path: Path
) -> None:
    service, _, hooked = services(client, tmp_path / "media")
    service.upload("c-1", 1, b"image bytes", T0)
    assert service.apply("c-1", 1, 1, "public", None, T0).status == "applied"
    hooked.hook = crash
    with pytest.raises(Crash):
        service.apply("c-1", 1, 2, "hidden", None, T0)
    # The fence took revision 2; the file is still public, and effective says so.
    assert public_files(tmp_path / "media") == ["c-1.v1", "c-1.v1.thumb"]
    seen = service.effective("c-1", T0)
    assert seen is not None and (seen.decision_revision, seen.visibility) == (2, "public")
    # The retry of the same action is stale for the fence, and heals the public directory.
    assert service.apply("c-1", 1, 2, "hidden", None, T0).status == "stale"
    assert public_files(tmp_path / "media") == []
    seen = service.effective("c-1", T0)
    assert seen is not None and seen.visibility == "hidden"


def test_a_crash_after_the_fence_of_an_allow_exports_on_retry(
    client: redis.Redis, tmp_path: Path
) -> None:
    service, _, hooked = services(client, tmp_path / "media")
    service.upload("c-1", 1, b"image bytes", T0)
    hooked.hook = crash
    with pytest.raises(Crash):
        service.apply("c-1", 1, 1, "public", None, T0)
    seen = service.effective("c-1", T0)
    assert seen is not None and seen.visibility == "pending"  # decided, not served
    assert service.apply("c-1", 1, 1, "public", None, T0).status == "stale"
    assert public_files(tmp_path / "media") == ["c-1.v1", "c-1.v1.thumb"]
    seen = service.effective("c-1", T0)
    assert seen is not None and seen.visibility == "public"


def test_a_failed_purge_is_retried_with_its_paths(client: redis.Redis, tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def purge(content_id: str, paths: list[Path]) -> None:
        calls.append(sorted(path.name for path in paths))
        if len(calls) == 1:
            raise TimeoutError("CDN purge timed out")

    service, _, _ = services(client, tmp_path / "media", invalidate=purge)
    service.upload("c-1", 1, b"image bytes", T0)
    service.apply("c-1", 1, 1, "public", None, T0)
    service.apply("c-1", 1, 2, "hidden", None, T0)
    seen = service.effective("c-1", T0)
    assert seen is not None and seen.visibility == "public"  # caches may still serve it
    service.apply("c-1", 1, 2, "hidden", None, T0, repair=True)
    assert calls == [["c-1.v1", "c-1.v1.thumb"], ["c-1.v1", "c-1.v1.thumb"]]
    seen = service.effective("c-1", T0)
    assert seen is not None and seen.visibility == "hidden"
    service.apply("c-1", 1, 2, "hidden", None, T0, repair=True)
    assert len(calls) == 2  # purged once it succeeded: nothing left to purge


Setup = Callable[[ContentService], None]
Step = Callable[[ContentService], Any]


def _allow(service: ContentService) -> None:
    service.upload("c-1", 1, b"v1 bytes", T0)
    service.apply("c-1", 1, 1, "public", None, T0)


def _hide(service: ContentService) -> None:
    service.upload("c-1", 1, b"v1 bytes", T0)
    service.apply("c-1", 1, 1, "hidden", None, T0)


INTERLEAVINGS: dict[str, tuple[Setup, Step, Step, tuple[list[str], str]]] = {
    # An allow of version 1 whose fence passed, then an upload of version 2 runs whole.
    "upload during an allow": (
        lambda s: s.upload("c-1", 1, b"v1 bytes", T0),
        lambda s: s.apply("c-1", 1, 1, "public", None, T0),
        lambda s: s.upload("c-1", 2, b"v2 bytes", T0 + 1),
        ([], "pending"),
    ),
    # An allow whose fence passed, then a hide of a newer revision runs whole.
    "hide during an allow": (
        _hide,
        lambda s: s.apply("c-1", 1, 2, "public", None, T0),
        lambda s: s.apply("c-1", 1, 3, "hidden", None, T0),
        ([], "hidden"),
    ),
    # A hide whose fence passed, then an edit is uploaded and allowed.
    "upload and allow during a hide": (
        _allow,
        lambda s: s.apply("c-1", 1, 2, "hidden", None, T0),
        lambda s: (s.upload("c-1", 2, b"v2", T0 + 1), s.apply("c-1", 2, 1, "public", None, T0)),
        (["c-1.v2", "c-1.v2.thumb"], "public"),
    ),
    # A hide whose fence passed, then an upload of version 2 runs whole.
    "upload during a hide": (
        _allow,
        lambda s: s.apply("c-1", 1, 2, "hidden", None, T0),
        lambda s: s.upload("c-1", 2, b"v2 bytes", T0 + 1),
        ([], "pending"),
    ),
}


@pytest.mark.parametrize("case", sorted(INTERLEAVINGS))
@pytest.mark.parametrize("order", ["interleaved", "first then second", "second then first"])
def test_racing_operations_end_with_what_was_decided(
    client: redis.Redis, tmp_path: Path, case: str, order: str
) -> None:
    setup, first, second, (files, visibility) = INTERLEAVINGS[case]
    hooked_service, other, hooked = services(client, tmp_path / "media")
    setup(other)
    if order == "interleaved":
        hooked.hook = lambda: second(other)
        first(hooked_service)
    elif order == "first then second":
        first(hooked_service)
        second(other)
    else:
        second(other)
        first(hooked_service)
    assert public_files(tmp_path / "media") == files
    seen = other.effective("c-1", T0)
    assert seen is not None and seen.visibility == visibility


def test_purges_failing_at_random_all_heal_on_retry(
    client: redis.Redis, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from modstream.jobs.enforce import failing_purge

    caplog.set_level(logging.WARNING, logger="modstream.content_service")

    service, _, _ = services(client, tmp_path / "media", invalidate=failing_purge(0.5, seed=7))
    items = [f"c-{n}" for n in range(40)]
    for cid in items:
        service.upload(cid, 1, b"bytes", T0)
        service.apply(cid, 1, 1, "public", None, T0)
        service.apply(cid, 1, 2, "hidden", None, T0)
    visible = [cid for cid in items if service.effective(cid, T0).visibility != "hidden"]  # type: ignore[union-attr]
    assert 5 < len(visible) < 35  # about half of the purges failed
    failed = [r.getMessage() for r in caplog.records if r.name == "modstream.content_service"]
    assert len(failed) >= len(visible) and "cache purge failed" in failed[0]  # each one said
    for _ in range(20):  # the reconciler's repairs, round after round
        for cid in visible:
            service.apply(cid, 1, 2, "hidden", None, T0, repair=True)
        visible = [cid for cid in visible if service.effective(cid, T0).visibility != "hidden"]  # type: ignore[union-attr]
    assert visible == [] and public_files(tmp_path / "media") == []


def _rows(raw: dict[str, Any], topic: str) -> Any:
    from pyflink.common import Row

    return Row(topic, raw["content_id"], json.dumps(raw), T0, f"{topic}#0")


def test_a_rolled_back_redis_hash_is_found_by_the_audit_and_repaired(
    client: redis.Redis, stack: Settings, tmp_path: Path
) -> None:
    media = tmp_path / "media"
    namespace = f"it-{uuid.uuid4().hex[:8]}"
    service = ContentService(client, media, namespace=namespace)
    cid = f"rb-{uuid.uuid4().hex[:8]}"
    allow, hide = action(cid, 1, "public"), action(cid, 2, "hidden")
    service.upload(cid, 1, b"image bytes", T0)
    service.apply(cid, 1, 1, "public", None, T0)
    before = client.hgetall(service.key(cid))
    service.apply(cid, 1, 2, "hidden", None, T0)
    # Redis restarts from an AOF that lost the last second: the hash is as before the hide.
    client.delete(service.key(cid))
    client.hset(service.key(cid), mapping=before)  # type: ignore[arg-type]

    config = ReconcilerConfig(
        sla_ms=200,
        audit_ms=100,
        redis_url=stack.redis_url,
        media_dir=str(media),
        namespace=namespace,
    )
    reconcile, runtime = Reconcile(config), FakeRuntimeContext()
    reconcile.open(runtime)  # type: ignore[arg-type]
    context = FakeContext(cid)
    out = []
    seen_before = {
        "content_id": cid,
        "content_version": 1,
        "decision_revision": 2,
        "visibility": "hidden",
        "ts": T0,
    }
    for raw, topic in ((allow, "moderation.actions"), (hide, "moderation.actions")):
        out += list(reconcile.process_element(_rows(raw, topic), context))
    # What the Action Service published before the crash: it agreed.
    out += list(reconcile.process_element(_rows(seen_before, "content.visibility"), context))
    repairs: list[dict[str, Any]] = []
    deadline = time.monotonic() + 10
    while not repairs:
        assert time.monotonic() < deadline, "the audit found no discrepancy"
        time.sleep(0.12)
        for emitted in reconcile.on_timer(int(time.time() * 1000), context):
            if emitted[0] == "enforcement.repairs":
                repairs.append(json.loads(emitted[2]))
    assert repairs[0]["repair_of"] == hide["action_id"]
    intents = enforcement.RedisIntents(client, prefix=f"{namespace}-intent")
    assert enforcement.enforce(repairs[0], intents, service).status == "applied"
    assert client.hget(service.key(cid), "revision") == b"2"
    assert public_files(media) == []
    reconcile.close()
