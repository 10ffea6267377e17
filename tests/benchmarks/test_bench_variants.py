"""What `modstream bench` runs (modstream/bench/variants.py), the per-version code figure of
its JSON line (modstream/bench/compare.py `step_cost`) and the in-process bench of the step and
the sanctions as the job runs them (modstream/bench/fire.py), without a broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modstream.bench import fire
from modstream.bench.compare import step_cost
from modstream.bench.variants import VARIANTS
from modstream.demo.workload import BENCH_MIX, generate
from modstream.moderation.step import ALL_TOPICS


def _argv(name: str) -> list[str]:
    topics = {topic: f"t.{topic}" for topic in (*ALL_TOPICS, "floor.out")}
    return VARIANTS[name].command("p", topics, Path("/tmp/run"))


def _conf(argv: list[str]) -> dict[str, str]:
    pairs = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--flink-conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def test_every_flink_variant_keeps_state_as_the_deployment_does() -> None:
    flink = [name for name, variant in VARIANTS.items() if not variant.is_peer]
    assert sorted(flink) == ["floor", "java-floor", "modstream"]
    for name in flink:
        conf = _conf(_argv(name))
        assert conf["state.backend.type"] == "rocksdb", name
        assert conf["execution.checkpointing.incremental"] == "true", name
    assert all("--flink-conf" not in _argv(name) for name in VARIANTS if name not in flink)


def test_the_moderation_variant_runs_the_batched_engine_unless_told_otherwise() -> None:
    argv = _argv("modstream")
    assert argv[argv.index("--engine") + 1] == "batched"


def test_step_cost_reports_a_warm_pass_and_the_cold_one_apart() -> None:
    lines = generate(
        seed=5, versions=30, start_ts=1_700_000_000_000, extras=False, malformed=False,
        mix=BENCH_MIX,
    )  # fmt: skip
    cost = step_cost(lines)
    assert cost["events"] == len(lines)
    for key in ("admit", "step"):
        assert cost[f"{key}_us_per_event"] > 0
        assert cost[f"cold_{key}_us_per_event"] > 0
    assert cost["outputs_per_event"] > 1
    assert cost["fire_us_per_event"] > 0  # the step with the job's adapter
    assert 0 < cost["state_bytes_per_version"] < 4096


def test_the_fire_bench_times_the_step_and_the_sanctions_as_the_job_runs_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert fire.main(["--versions", "120", "--authors", "4"]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["fire_us_per_event"] > 0 and line["sanctions_us_per_event"] > 0
    assert line["sanctions_rows"] > 0 and 0 < line["authors_sanctioned"] <= 4
    assert 0 < line["account_bytes_mean"] <= line["account_bytes_max"]
