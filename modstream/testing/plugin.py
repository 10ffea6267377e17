"""The pytest plugin of modstream's test tools: the shared fixtures, loaded by pytest wherever
modstream is installed (entry point `pytest11`, pyproject.toml), so a project testing its own
policy or detector against modstream has them without a conftest.py.

- `_logging_as_it_was` (autouse): a test that runs a modstream command or a job's main
  configures logging; the next test starts with logging as it was.
- `stack`: the running stack's Settings (MODSTREAM_* variables), or a clear failure within
  `REACH_TIMEOUT_S` when its broker or Redis does not answer (never a hang).
- `kafka`: bounded Kafka helpers on that stack (`modstream.testing.stack.Kafka`).
- `topics`: content.versions, content.validated and moderation.dlq under a prefix unique to
  the test, created on the broker (`_prefix` names the prefix).
- `start_job`: starts `modstream.jobs.<module>` in its own process; stopped at teardown.
- `moderation_deployment`: every topic of one moderation job, unique to the test, the job's
  options and the test reviewers' grants (`modstream.testing.stack.ModerationDeployment`).

Tests that use `stack` and what depends on it are integration tests: mark them
`@pytest.mark.integration`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# Imported where a fixture is used, not when pytest loads the plugin: a session that never asks
# for a stack neither pays for the Kafka and Redis clients nor reads MODSTREAM_* settings before
# its conftest.py set them.
if TYPE_CHECKING:
    from modstream.core.config import Settings
    from modstream.testing.stack import JobProcess, Kafka, ModerationDeployment


@pytest.fixture(autouse=True)
def _logging_as_it_was(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A test that runs `modstream.cli.main.main` or a job's main configures logging (and exports
    its format to the environment, modstream/core/logs.py): the next test starts as before."""
    for name in ("MODSTREAM_LOG_FORMAT", "MODSTREAM_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    root, own = logging.getLogger(), logging.getLogger("modstream")
    handlers, levels = list(root.handlers), (root.level, own.level)
    yield
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(levels[0])
    own.setLevel(levels[1])


@pytest.fixture(scope="session")
def stack() -> Settings:
    """The running stack, or a clear failure within REACH_TIMEOUT_S (never a hang)."""
    from modstream.core.config import Settings
    from modstream.testing.stack import unreachable

    settings = Settings.from_env()
    reason = unreachable(settings)
    if reason is not None:
        pytest.fail(reason, pytrace=False)
    return settings


@pytest.fixture(scope="session")
def kafka(stack: Settings) -> Kafka:
    from modstream.testing.stack import Kafka

    return Kafka(stack.bootstrap_servers)


@pytest.fixture
def topics(kafka: Kafka) -> dict[str, str]:
    """Contract topic -> a topic unique to this test, created on the real broker."""
    prefix = f"it-{uuid.uuid4().hex[:10]}"
    mapping = {
        name: f"{prefix}.{name}"
        for name in ("content.versions", "content.validated", "moderation.dlq")
    }
    kafka.create_topics(list(mapping.values()))
    mapping["_prefix"] = prefix
    return mapping


@pytest.fixture
def start_job(tmp_path: Path, stack: Settings) -> Iterator[Callable[..., JobProcess]]:
    """Start modstream.jobs.<module> with the given arguments; every job is stopped at
    teardown. `session=True`: in a process group of its own, for `JobProcess.kill_group`."""
    from modstream.testing.stack import start_job_process

    started: list[JobProcess] = []

    def start(
        module: str, *args: str, env: dict[str, str] | None = None, session: bool = False
    ) -> JobProcess:
        log = tmp_path / f"{module}-{len(started)}.log"
        job = start_job_process(log, module, *args, env=env, session=session)
        started.append(job)
        return job

    yield start
    for job in started:
        if job.alive():
            job.stop()


@pytest.fixture
def moderation_deployment(kafka: Kafka, stack: Settings, tmp_path: Path) -> ModerationDeployment:
    from modstream.testing.stack import new_moderation_deployment

    return new_moderation_deployment(kafka, stack, tmp_path / "ckpt")
