"""`modstream demo --jobmanager HOST:PORT`: the demo's jobs submitted to a session cluster
(`modstream submit`, from the package) instead of started here, each one then watched and
cancelled through the cluster's REST API as the demo watches and stops its local processes."""

from __future__ import annotations

import re
from pathlib import Path

from modstream.stack import cluster, cluster_jobs
from modstream.stack.local import StackError
from modstream.stack.package import Package

_SUBMITTED = re.compile(r"job \S+ ([0-9a-f]{32}) submitted")
_TERMINAL = ("FINISHED", "CANCELED", "FAILED")


class SubmittedJob:
    """A job on the cluster, with the part of subprocess.Popen's interface the demo uses."""

    def __init__(self, address: str, jid: str) -> None:
        self.address, self.jid = address, jid

    def state(self) -> str:
        return cluster_jobs.job_state(self.address, self.jid)

    def poll(self) -> int | None:
        """None while the job is active, like a running process."""
        state = self.state()
        return None if state not in _TERMINAL else (1 if state == "FAILED" else 0)

    def wait_running(self, timeout_s: float = 180) -> None:
        state = cluster_jobs.wait_state(self.address, self.jid, ("RUNNING", *_TERMINAL), timeout_s)
        if state != "RUNNING":
            raise StackError(f"job {self.jid} is {state} on {self.address}")

    def send_signal(self, _signal: int) -> None:
        """Cancel it (a local job cancels itself on SIGTERM)."""
        cluster_jobs.rest(self.address, f"/jobs/{self.jid}?mode=cancel", method="PATCH")

    def wait(self, timeout: float) -> int:
        cluster_jobs.wait_state(self.address, self.jid, _TERMINAL, timeout)
        return 0

    def kill(self) -> None:
        self.send_signal(9)


def submit(
    address: str,
    package: Package,
    job: str,
    args: list[str],
    log_path: Path,
    env: dict[str, str],
) -> SubmittedJob:
    """`modstream submit JOB` with `args`, its client's output in `log_path`."""
    with open(log_path, "wb") as log:
        code = cluster.submit(job, address, args, package=package, output=log, env=env)
    found = _SUBMITTED.search(log_path.read_text(errors="replace"))
    if code != 0 or found is None:
        raise StackError(f"submitting the {job} job to {address} failed; see {log_path}")
    return SubmittedJob(address, found.group(1))
