"""The decoded version states a moderate instance keeps after storing them
(modstream/moderation/state_schema.py `DecodedStates`): a read of the bytes it stored last takes
the structure instead of decoding, and nothing it keeps can change what the job decides."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import cloudpickle
import pytest
import yaml

from modstream.bench.fire import NOW_MS, bench_config, step_records
from modstream.bench.peer import Engine
from modstream.demo.workload import generate
from modstream.jobs.moderation.config import ModerationConfig
from modstream.jobs.moderation.moderate import Moderate
from modstream.moderation import state_schema
from modstream.moderation.state import VersionState
from modstream.testing.flink import decoded, moderate, stored_state
from modstream.testing.policies import GLOBAL_YAML
from modstream.testing.records import T0, evidence, upload


def _state(content_id: str = "c-1", revision: int = 1) -> VersionState:
    return VersionState(content_id=content_id, content_version=1, decision_revision=revision)


def test_the_state_stored_last_is_read_back_without_decoding_once() -> None:
    states = state_schema.DecodedStates(4)
    state = _state()
    raw = states.dump(state)
    assert raw == state_schema.dump_version(state)  # stored exactly as before
    assert states.load(bytes(raw)) is state  # equal bytes, not the same object: kept
    again = states.load(raw)  # taken once: the step may have changed it since
    assert again is not state and again == state_schema.load_version(raw)
    assert states.counted() == (1, 1) and states.counted() == (0, 0)


def test_other_bytes_are_decoded_and_the_oldest_kept_state_goes_first() -> None:
    states = state_schema.DecodedStates(2)
    first, second, third = (_state(f"c-{n}") for n in range(3))
    raws = [states.dump(state) for state in (first, second, third)]
    assert len(states) == 2
    assert states.load(raws[0]) == first and states.load(raws[0]) is not first  # dropped
    assert states.load(raws[2]) is third and states.load(raws[1]) is second
    changed = state_schema.dump_version(_state("c-2", revision=2))
    assert states.load(changed) == _state("c-2", revision=2)  # a restored checkpoint: decoded
    assert states.load(None) is None and states.load(b"") is None


def test_none_are_kept_at_capacity_0_and_a_negative_one_is_refused() -> None:
    states = state_schema.DecodedStates(0)
    state = _state()
    assert states.load(states.dump(state)) is not state and len(states) == 0
    with pytest.raises(ValueError, match="below 0"):
        state_schema.DecodedStates(-1)


def test_a_state_stored_as_json_is_not_kept() -> None:
    states = state_schema.DecodedStates(4)
    state = _state()
    state.report_weight = 10**30  # MessagePack cannot hold it: stored as JSON text
    raw = states.dump(state)
    assert raw.startswith(b"{") and len(states) == 0
    assert states.load(raw) is not state


def test_an_input_that_fails_on_a_kept_state_leaves_nothing_of_its_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The failed input changed the kept structure before it failed; the run again without it
    reads the stored bytes, not that structure."""
    policy = yaml.safe_load(GLOBAL_YAML.read_text())
    adapter, runtime_context, ctx = moderate(ModerationConfig(trusted_policy=policy))
    ctx.key = "c-1\x1f1"
    real_step = Moderate._step
    taken: list[Any] = []

    def failing_step(self: Moderate, state: Any, topic: str, *args: Any) -> Any:
        if topic == "detector.results":
            taken.append(state)
            state.decision_revision = 99  # half applied
            raise RecursionError("maximum recursion depth exceeded")
        return real_step(self, state, topic, *args)

    monkeypatch.setattr(Moderate, "_step", failing_step)
    text = upload(surface="comment", modality="text", mime_type="text/plain")
    adapter.process_element(decoded("content.versions", text), ctx)
    list(adapter.on_timer(T0, ctx))
    assert len(adapter.adapter.decoded) == 1  # the upload's state, kept
    adapter.process_element(decoded("detector.results", evidence(at=T0 + 1000)), ctx)
    outputs = list(adapter.on_timer(T0 + 1000, ctx))
    assert taken and taken[0].decision_revision == 99  # the kept structure was changed
    letters = [json.loads(o[2]) for o in outputs if o[0] == "moderation.dlq"]
    assert [x["error_class"] for x in letters] == ["permanent"]
    assert stored_state(runtime_context).decision_revision == 1


def _run(
    config: ModerationConfig, records: list[tuple[str, str]], until: int
) -> tuple[Engine, list[tuple[str, str | None, str]]]:
    engine = Engine(config, sanctions_stage=False)
    for topic, raw in records:
        engine.admit(topic, raw, topic, 0)
    return engine, list(engine.drain(until))


@pytest.mark.parametrize("extras", [False, True])
def test_the_kept_states_change_no_output_and_no_stored_byte(extras: bool) -> None:
    """The bench's mix, and the demo's (reviews, appeals, reports, malformed records), through
    the per-version code with the states kept and with none kept: the same outputs, the same
    stored bytes. A structure that drifted from what its bytes decode to (an int where the
    bytes give a float, say) would show in the next bytes stored."""
    started = NOW_MS - 300 * 200 - 300_000
    lines = generate(seed=11, versions=300, start_ts=started, extras=extras, malformed=extras)
    records = step_records(lines)
    stamps = [line["value"].get("ts") for line in lines if isinstance(line["value"], dict)]
    until = max(ts for ts in stamps if isinstance(ts, int)) + 86_400_000  # TTLs fire too
    config = bench_config(NOW_MS)
    kept, kept_out = _run(config, records, until)
    none, none_out = _run(dataclasses.replace(config, state_cache_versions=0), records, until)
    hits, _ = kept.moderate.decoded.counted()
    assert hits > len(records) // 2  # kept states were read
    assert none.moderate.decoded.counted()[0] == 0
    assert len(kept_out) > len(records) // 2
    assert kept_out == none_out
    assert kept.states == none.states and kept.refused == none.refused


def test_a_pickled_moderate_function_keeps_its_cache_size_and_none_of_its_states() -> None:
    """PyFlink ships `Moderate` pickled to each TaskManager: the copy has an empty cache."""
    policy = yaml.safe_load(GLOBAL_YAML.read_text())
    adapter = Moderate(ModerationConfig(trusted_policy=policy, state_cache_versions=5))
    adapter.decoded.dump(_state())
    copied = cloudpickle.loads(cloudpickle.dumps(adapter))
    assert copied.decoded.capacity == 5 and len(copied.decoded) == 0
    assert len(adapter.decoded) == 1
