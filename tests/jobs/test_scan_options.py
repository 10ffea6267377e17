"""The scan job's Flink settings (modstream/jobs/scan/job.py `_job_config`): its own for slow media
records, and the deployment's `--flink-conf` on top (Kubernetes passes its checkpoint storage
so)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from modstream.core.config import Settings
from modstream.jobs import runtime
from modstream.jobs.scan import config as scan_config
from modstream.scanning import pools as scan_pools


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
    args = scan_config.options().parse_args(["--checkpoint-dir", str(tmp_path), *argv])
    pools = [scan_pools.parse_pool(",".join(modalities))]
    return scan_config.deployment_config(
        args, Settings.from_env({"MODSTREAM_CONFIG": "none"}), pools
    )


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


def test_without_options_a_job_runs_every_shipped_pool_over_live_and_backfill_topics() -> None:
    pools = scan_config.pools_from(scan_config.options().parse_args([]))
    assert [(pool.name, pool.modalities) for pool in pools] == [
        ("text", ("text",)),
        ("image", ("image",)),
        ("av", ("video", "audio")),
    ]
    assert sorted(m for pool in pools for m in pool.modalities) == sorted(scan_pools.MODALITIES)
    assert pools[2].topics() == [
        "scan.requests.video",
        "scan.requests.audio",
        "scan.requests.video.backfill",
        "scan.requests.audio.backfill",
        "moderation.reports",
    ]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--pool", "image=image"], [("image", ("image",))]),
        (["--modalities", "video,audio"], [("video-audio", ("video", "audio"))]),
        (
            ["--pool", "t=text", "--pool", "m=image,video"],
            [("t", ("text",)), ("m", ("image", "video"))],
        ),
    ],
)
def test_pools_from_options(argv: list[str], expected: list[tuple[str, tuple[str, ...]]]) -> None:
    pools = scan_config.pools_from(scan_config.options().parse_args(argv))
    assert [(pool.name, pool.modalities) for pool in pools] == expected


@pytest.mark.parametrize(
    "argv",
    [
        ["--pool", "a=text", "--pool", "b=text"],
        ["--pool", "x=text", "--pool", "x=image"],
        ["--pool", "p=smell"],
    ],
)
def test_pools_that_overlap_or_name_no_modality_are_refused(argv: list[str]) -> None:
    with pytest.raises(ValueError, match="scan: pool"):
        scan_config.pools_from(scan_config.options().parse_args(argv))
