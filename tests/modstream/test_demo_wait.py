"""The demo's waits (modstream/demo/wait.py) show their counts as progress on stderr, without
the stack: decisions so far, then actions enforced of all."""

from __future__ import annotations

import types
from typing import Any

import pytest

from modstream.core import logs
from modstream.core.progress import Progress
from modstream.demo import wait as demo_wait


def test_decisions_then_enforcement_are_counted_on_stderr_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    polls = {"moderation.decisions": 0}

    def mine(_settings: Any, topic: str, _run: str) -> list[dict[str, Any]]:
        if topic == "p.moderation.actions":
            return [{"action_id": "a1"}, {"action_id": "a2"}]
        polls["moderation.decisions"] += 1
        decided = [{"content_id": f"c{n}"} for n in range(polls["moderation.decisions"])]
        return decided + ([{"content_id": "end"}] if polls["moderation.decisions"] == 2 else [])

    class Client:
        """a1 is enforced from the first look, a2 from the second round of looks."""

        calls = 0

        def get(self, key: str) -> bytes | None:
            self.calls += 1
            return b"done" if key == "intent:a1" or self.calls > 2 else None

    monkeypatch.setattr(demo_wait, "mine", mine)
    monkeypatch.setattr(demo_wait, "DONE", {b"done"})
    monkeypatch.setattr(demo_wait.time, "sleep", lambda _s: None)
    deployment = types.SimpleNamespace(
        settings=None,
        run_id="p-",
        names={"moderation.decisions": "p.moderation.decisions"}
        | {"moderation.actions": "p.moderation.actions"},
        logs="/nowhere",
    )
    logs.configure(False, "INFO", command="demo")
    with Progress("demo", live=False, every_s=0.0) as shown:
        assert demo_wait.await_outcome(deployment, "end", {}, Client(), shown)  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert out == ""
    assert "demo: waiting for the committed decisions: 1 decisions" in err
    assert "demo: waiting for enforcement: 1/2 actions (50.0%)" in err
    assert "demo: waiting for enforcement: 2/2 actions (100.0%)" in err
    assert "demo: 20 s (the reconciler's SLA) and a bit" in err


def test_the_scan_wait_holds_until_the_model_after_the_gate_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The real-detector run stopped waiting once every image had its gate's result, before
    the images' model answered (issue 16's real-demo run: 55 of 66 images left `scanning`)."""
    clock = {"now": 0.0}
    polls: list[int] = []
    gate_key = {"content_id": "r-img", "content_version": 1}

    def mine(_settings: Any, topic: str, _run: str) -> list[dict[str, Any]]:
        if topic == "r.decisions":
            return [{**gate_key, "decision_revision": 1, "state": "scanning"}]
        polls.append(1)
        gate = [{"content_id": "r-img", "content_version": 1, "detector": "media_check"}]
        model = [{"content_id": "r-img", "content_version": 1, "detector": "nsfw_image"}]
        tick = {"content_id": f"r-end-tick-{len(polls)}", "content_version": 1}
        ticks = [{**tick, "detector": "offensive_text"}]  # a new one every second
        return gate + (model if len(polls) > 20 else []) + ticks

    def sleep(seconds: float) -> None:
        clock["now"] += seconds

    monkeypatch.setattr(demo_wait, "mine", mine)
    monkeypatch.setattr(demo_wait.workload, "produce", lambda *_a, **_k: None)
    monkeypatch.setattr(demo_wait.time, "sleep", sleep)
    monkeypatch.setattr(demo_wait.time, "monotonic", lambda: clock["now"])
    expected = {("r-img", 1, "media_check"), ("r-img", 1, "nsfw_image")}
    with Progress("demo", live=False, every_s=0.0) as shown:
        settings = types.SimpleNamespace(bootstrap_servers="nowhere:9092")
        names = {"detector.results": "r.d", "moderation.decisions": "r.decisions"}
        demo_wait.wait_for_scans(settings, "r-", names, expected, shown, 6.0)  # type: ignore[arg-type]
    assert 20 + 6 < len(polls) < 40  # past the model's answer, then quiet for 6 s
