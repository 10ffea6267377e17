"""The scan job's Flink settings (jobs/scan.py `_job_config`): its own for slow media records,
and the deployment's `--flink-conf` on top (Kubernetes passes its checkpoint storage so)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from jobs import runtime, scan
from modstream.config import Settings


def _job_config_of(
    argv: list[str], modalities: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> runtime.JobConfig:
    """`_job_config` without a broker: runtime.job_config's restore checks are not the subject."""

    def without_broker(name: str, args: argparse.Namespace, settings: Settings, **_: Any):
        return runtime.JobConfig(
            name=name,
            bootstrap_servers="kafka:9092",
            checkpoint_dir=args.checkpoint_dir,
            transactional_id_prefix="modstream-scan",
            group_id="modstream-scan",
            flink_conf=dict(args.flink_conf),
        )

    monkeypatch.setattr(runtime, "job_config", without_broker)
    args = scan.options().parse_args(["--checkpoint-dir", str(tmp_path), *argv])
    return scan._job_config(args, Settings.from_env({"MODSTREAM_CONFIG": "none"}), modalities)


def test_media_scans_keep_the_deployments_flink_conf(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    job = _job_config_of(
        [
            "--flink-conf", "execution.checkpointing.dir=s3://state/checkpoints/scan",
            "--flink-conf", "taskmanager.network.memory.buffer-debloat.enabled=false",
        ],
        ["text", "image"],
        monkeypatch,
        tmp_path,
    )  # fmt: skip
    assert job.flink_conf == {
        "execution.checkpointing.unaligned.enabled": "true",
        "taskmanager.network.memory.buffer-debloat.enabled": "false",  # the deployment's wins
        "execution.checkpointing.dir": "s3://state/checkpoints/scan",
    }


def test_a_text_scan_keeps_flinks_aligned_checkpoints(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    job = _job_config_of([], ["text"], monkeypatch, tmp_path)
    assert job.flink_conf == {}
