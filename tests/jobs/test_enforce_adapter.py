"""The enforce job's adapter with small fakes (no JVM, no Redis): one poison record goes to the
DLQ with its class, and the record after it is still enforced."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from pyflink.common import Row

from modstream.enforcement.content_service import Visibility
from modstream.jobs.enforce import Enforce, EnforceConfig
from modstream.testing.enforcement import POISON_ACTIONS, MemoryContent, MemoryIntents
from modstream.testing.enforcement import job_action as action
from modstream.testing.flink import FakeMapState
from modstream.testing.flink import ProcessingContext as FakeContext
from modstream.testing.records import SECRET_TEXT, T0


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class FakeService(MemoryContent):
    """The Content Service's fences in memory, and what users see."""

    def __init__(self, broken_for: str | None = None) -> None:
        super().__init__()
        self.broken_for = broken_for

    def effective(self, content_id: str, ts: int) -> Visibility | None:
        if content_id == self.broken_for:
            raise RuntimeError(SECRET_TEXT)  # an unexpected failure, with text in it
        return Visibility(content_id, self.version, self.revision, self.visibility, ts)

    def unsettled(self, content_id: str) -> bool:
        return False  # nothing served apart from what was decided

    def converge(self, content_id: str) -> None: ...


CLOCK_MS = 1_700_000_000_000  # the adapter's processing clock, fixed


def adapter(service: FakeService | None = None) -> tuple[Enforce, FakeMapState]:
    config = EnforceConfig(
        redis_url="redis://unused", media_dir="/nonexistent", clock=lambda: CLOCK_MS
    )
    enforce = Enforce(config)
    waiting = FakeMapState()
    enforce.attach(service or FakeService(), MemoryIntents(), waiting)
    return enforce, waiting


def row(raw: str | None, topic: str = "moderation.actions", key: str | None = "c-1") -> Row:
    return Row(topic, key, raw, T0, f"{topic}#0")


def run(enforce: Enforce, rows: list[Row]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for value in rows:
        for emitted in enforce.process_element(value, FakeContext()):
            out.append((emitted[0], json.loads(emitted[2])))
    return out


VALID = json.dumps(action(1, "hidden"))
NEXT = json.dumps(action(2, "public"))

POISON = POISON_ACTIONS


@pytest.mark.parametrize("raw", list(POISON.values()), ids=list(POISON))
def test_a_poison_action_is_dead_lettered_and_the_next_one_is_enforced(raw: str | None) -> None:
    service = FakeService()
    enforce, _ = adapter(service)
    out = run(enforce, [row(raw), row(VALID)])
    assert [topic for topic, _ in out] == ["moderation.dlq", "content.visibility"]
    letter = out[0][1]
    assert letter["error_class"] == "schema" and letter["source_topic"] == "moderation.actions"
    assert letter["key"] == "c-1"
    assert out[1][1]["visibility"] == "hidden" and service.applies == 1


REPAIR = {**action(3, "hidden"), "action_id": sha("r-3"), "repair_of": sha("a-3")}
BAD_REPAIRS = {
    "no repair_of": json.dumps({k: v for k, v in REPAIR.items() if k != "repair_of"}),
    "repair_of not a string": json.dumps({**REPAIR, "repair_of": 7}),
    "repair_of too long": json.dumps({**REPAIR, "repair_of": "x" * 300}),
    "invalid action": json.dumps({**REPAIR, "visibility": "everywhere"}),
    "deep": '{"repair_of":' * 60_000 + '"x"' + "}" * 60_000,
    "not JSON": "repair!",
}


@pytest.mark.parametrize("raw", list(BAD_REPAIRS.values()), ids=list(BAD_REPAIRS))
def test_a_poison_repair_is_dead_lettered_and_the_next_repair_applies(raw: str) -> None:
    service = FakeService()
    enforce, _ = adapter(service)
    out = run(
        enforce,
        [row(raw, "enforcement.repairs"), row(json.dumps(REPAIR), "enforcement.repairs")],
    )
    assert [topic for topic, _ in out] == ["moderation.dlq", "content.visibility"]
    assert out[0][1]["error_class"] == "schema"
    assert out[0][1]["source_topic"] == "enforcement.repairs"
    assert service.revision == 3


def test_an_unexpected_failure_on_a_valid_action_is_permanent_and_the_job_goes_on() -> None:
    service = FakeService(broken_for="c-broken")
    enforce, _ = adapter(service)
    broken = json.dumps({**action(1, "hidden"), "content_id": "c-broken", "action_id": sha("b")})
    out = run(enforce, [row(broken, key="c-broken"), row(NEXT)])
    assert [topic for topic, _ in out] == ["moderation.dlq", "content.visibility"]
    letter = out[0][1]
    assert (letter["error_class"], letter["key"]) == ("permanent", "c-broken")
    assert "handling failed (RuntimeError)" in letter["message"]
    assert SECRET_TEXT not in letter["message"]
    assert json.loads(letter["raw"])["action_id"] == sha("b")
    assert out[1][1]["visibility"] == "public"


def test_a_failed_apply_waits_for_its_timer_and_a_corrupt_retry_entry_is_dropped_once() -> None:
    service = FakeService()
    service.failures = 1
    enforce, waiting = adapter(service)
    ctx = FakeContext()
    assert list(enforce.process_element(row(VALID), ctx)) == []
    first = action(1)["action_id"]
    assert set(waiting) == {first} and len(ctx.timers.processing) == 1
    # The retry's timer is on the injected clock: one backoff (100–200 ms at attempt 1) after it.
    [timer] = ctx.timers.processing
    assert CLOCK_MS + 100 <= timer <= CLOCK_MS + 200
    waiting.put("garbage", "{not json")
    waiting.put("wrong-shape", json.dumps({"at": 0, "attempt": 1, "source": "x", "action": []}))
    due = json.loads(waiting[first])["at"]
    out = [(r[0], json.loads(r[2])) for r in enforce.on_timer(due, ctx)]
    kinds = sorted((topic, record.get("error_class")) for topic, record in out)
    assert kinds == [
        ("content.visibility", None),
        ("moderation.dlq", "permanent"),
        ("moderation.dlq", "permanent"),
    ]
    assert dict(waiting) == {} and service.applies == 1
    assert list(enforce.on_timer(due + 1, ctx)) == []


def test_an_unreachable_intent_store_is_retried_then_exhausted_never_a_crash() -> None:
    class DownIntents(MemoryIntents):
        def begin(self, action_id: str, ttl_ms: int) -> str | None:
            raise ConnectionError("down")

    enforce = Enforce(
        EnforceConfig(redis_url="redis://unused", media_dir="/nonexistent", max_attempts=2)
    )
    waiting = FakeMapState()
    enforce.attach(FakeService(), DownIntents(), waiting)
    ctx = FakeContext()
    assert list(enforce.process_element(row(VALID), ctx)) == []
    out: list[Row] = []
    for _ in range(3):
        for stored in list(waiting.values()):
            out += list(enforce.on_timer(json.loads(stored)["at"], ctx))
    letters = [json.loads(r[2]) for r in out]
    assert [letter["error_class"] for letter in letters] == ["transient_exhausted"]
    assert letters[0]["attempts"] == 2 and waiting == {}


class PurgeFailing(FakeService):
    """Applied, but what is served lags (a failed cache purge) until `lagging` converges."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.lagging = failures
        self.converged = 0

    def unsettled(self, content_id: str) -> bool:
        return self.converged < self.lagging

    def converge(self, content_id: str) -> None:
        self.converged += 1


@pytest.mark.parametrize(("failures", "heals"), [(0, 0), (2, 2), (50, 5)])
def test_a_failed_purge_is_healed_on_timers_then_left_to_the_reconciler(
    failures: int, heals: int
) -> None:
    service = PurgeFailing(failures)
    enforce, waiting = adapter(service)
    assert [t for t, _ in run(enforce, [row(VALID)])] == ["content.visibility"]
    reports = 0
    while waiting:
        (key, stored), ctx = next(iter(waiting.items())), FakeContext()
        assert key.startswith("heal:") and json.loads(stored)["heal"] is True
        out = list(enforce.on_timer(json.loads(stored)["at"], ctx))
        reports += sum(1 for r in out if r[0] == "content.visibility")
    # One converge per heal, each reported; at most max_attempts - 1 heals after the apply.
    assert service.converged == heals == reports
    assert service.applies == 1
