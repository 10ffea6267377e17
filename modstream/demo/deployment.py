"""One `modstream demo` run's own deployment: its topics, consumer groups, transactional ids,
checkpoints and metrics ports, all under its run id. The run (modstream/demo/run.py) makes it; the
waits (modstream/demo/wait.py) read its logs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from modstream.core import endpoints
from modstream.core.config import Settings


@dataclasses.dataclass(frozen=True)
class Deployment:
    """One run's own deployment: topics, consumer groups, transactional ids and checkpoints
    under its run id, so nothing one run leaves unread reaches the next one."""

    settings: Settings
    run_id: str  # "demo1a2b3c-": every record of the run carries it
    names: dict[str, str]  # contract topic name -> this run's topic
    metrics_ports: dict[str, int] = dataclasses.field(default_factory=dict)  # job -> port

    @property
    def prefix(self) -> str:
        return self.run_id[:-1]

    @property
    def logs(self) -> Path:
        return self.settings.run_dir / "demo"

    def log_path(self, job: str) -> Path:
        return self.logs / f"{job}-{self.run_id}log"

    def job_args(self, job: str) -> list[str]:
        """A job's options that make it this deployment's."""
        args = [
            "--group-id", f"{self.prefix}-{job}",
            "--transactional-id-prefix", f"{self.prefix}-{job}",
            "--checkpoint-dir", str(self.logs / "checkpoints" / self.prefix / job),
        ]  # fmt: skip
        for name, physical in self.names.items():
            args += ["--topic", f"{name}={physical}"]
        if job in self.metrics_ports:
            args += ["--metrics-port", str(self.metrics_ports[job])]
        return args

    def metrics_endpoints(self) -> dict[str, str]:
        return {job: endpoints.url(port) for job, port in self.metrics_ports.items()}
