"""Fixtures of the jobs' tests."""

from __future__ import annotations

from typing import Any

import pytest

from modstream.core.config import Settings
from modstream.jobs import runtime


@pytest.fixture(scope="module")
def jvm(request: pytest.FixtureRequest) -> Any:
    """The gateway JVM with the jobs' jars loaded (deploy/flink-ext's classes), for tests that
    drive a Java class directly."""
    from pyflink.java_gateway import get_gateway

    name = request.module.__name__.rsplit(".", 1)[-1].replace("_", "-")
    settings = Settings.from_env()
    runtime.create_env(
        runtime.JobConfig(
            name=name,
            bootstrap_servers="",
            checkpoint_dir=settings.run_dir / "checkpoints" / name,
            transactional_id_prefix="t",
            group_id="t",
        ),
        settings,
    )
    return get_gateway().jvm  # create_env loaded the job's jars into the gateway JVM
