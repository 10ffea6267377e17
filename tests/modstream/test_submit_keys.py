"""`modstream submit` holds to the jobs' key rules before it packages anything (issue 27): a dev
secret beside brokers that are not local is refused as the job would refuse it."""

from __future__ import annotations

import argparse

import pytest

from modstream.cli.handlers import check_job_keys, cmd_submit
from modstream.core.config import Settings


def test_submit_refuses_a_dev_secret_beside_a_remote_broker_before_packaging(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MODSTREAM_SIGNING_DEV_SECRET", "dev")
    settings = Settings.from_env()
    remote = ["--bootstrap-servers", "kafka.modstream.svc:9093"]
    args = argparse.Namespace(job="moderation", jobmanager="127.0.0.1:1", job_args=remote)

    def no_packaging(*_: object) -> None:
        raise AssertionError("packaged before the keys were checked")

    monkeypatch.setattr("modstream.cli.handlers._package", no_packaging)
    with pytest.raises(SystemExit, match="moderation: MODSTREAM_SIGNING_DEV_SECRET is for local"):
        cmd_submit(args, settings)
    check_job_keys("enforce", remote, settings)  # holds no key: nothing to check
    check_job_keys("scan", ["--bootstrap-servers", "127.0.0.1:9092"], settings)  # local: fine
