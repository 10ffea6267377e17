"""The jobs on a session cluster, through its REST API: find one by name, stop it with a
savepoint, and `modstream upgrade`: the new code resubmitted from that savepoint.

An upgrade keeps what makes the job the same deployment: its operator uids (every stateful
operator sets one), its checkpoint directory and, recorded there, its transactional-id prefix
(modstream/jobs/restore.py). The savepoint is handed to the job as `--restore-from SAVEPOINT`, the
job's own way to pick its starting state; the old job has finished by then, so the new one is not
refused as a second live instance. In thread mode a TaskManager that already ran the job keeps the
modules it imported then (one interpreter per process): the new code runs on fresh TaskManagers only
(docs/cluster.md, "Known limits").
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modstream.stack.service import StackError

_ACTIVE = {"CREATED", "INITIALIZING", "RUNNING", "RESTARTING", "RECONCILING"}


def rest(address: str, path: str, body: dict[str, Any] | None = None, method: str = "") -> Any:
    """One call to the cluster's REST API; a JSON body makes it a POST."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"http://{address}{path}",
        data=data,
        method=method or ("POST" if data is not None else "GET"),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read()
    except urllib.error.HTTPError as error:
        raise StackError(f"{address}{path}: {error.code} {error.read()[:500]!r}") from None
    except OSError as error:
        raise StackError(f"no Flink cluster answers at {address} ({error})") from None
    return json.loads(text) if text else None


def jobs(address: str) -> list[dict[str, Any]]:
    """Every job the cluster knows: jid, name, state, start-time, ..."""
    return list(rest(address, "/jobs/overview")["jobs"])


def job_state(address: str, jid: str) -> str:
    """Job `jid`'s state, from /jobs/overview: never /jobs/JID, whose handler fetches every
    TaskManager's metrics, and a thread-mode job's Python gauge read while that job was being
    cancelled crashed the TaskManager (SIGSEGV in libpython; the reconciler's gauge)."""
    for job in jobs(address):
        if job["jid"] == jid:
            return str(job["state"])
    raise StackError(f"no job {jid} on the cluster at {address}")


def wait_tasks_running(address: str, jid: str, timeout_s: float = 300) -> None:
    """Until every task of job `jid` runs: a job is RUNNING while its Python tasks still
    initialize (each unpacks its Python archive first), and a savepoint triggered then fails
    ("Not all required tasks are currently running")."""
    deadline = time.monotonic() + timeout_s
    while True:
        job = next((job for job in jobs(address) if job["jid"] == jid), None)
        if job is None or job["state"] != "RUNNING":
            raise StackError(f"job {jid} is not running on the cluster at {address}")
        if job["tasks"]["running"] == job["tasks"]["total"]:
            return
        if time.monotonic() > deadline:
            raise StackError(f"job {jid}: not every task running after {timeout_s}s")
        time.sleep(1)


def active_job(address: str, name: str) -> str:
    """The id of the one active job named `name`; an error when there is none or several."""
    found = [job["jid"] for job in jobs(address) if job["name"] == name and job["state"] in _ACTIVE]
    if not found:
        raise StackError(f"no running {name} job on the cluster at {address}")
    if len(found) > 1:
        raise StackError(f"{len(found)} running {name} jobs on the cluster at {address}")
    return str(found[0])


def wait_state(address: str, jid: str, states: tuple[str, ...], timeout_s: float = 120) -> str:
    """Until job `jid` is in one of `states` (its state then); an error after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = job_state(address, jid)
        if state in states:
            return state
        if time.monotonic() > deadline:
            raise StackError(f"job {jid} is {state}, not {' or '.join(states)}, after {timeout_s}s")
        time.sleep(0.5)


def stop_with_savepoint(address: str, jid: str, directory: Path, timeout_s: float = 180) -> str:
    """Stop job `jid` with a savepoint in `directory` (not drained: event time does not jump
    to the end); the savepoint's location once the job has finished."""
    directory.mkdir(parents=True, exist_ok=True)
    trigger = rest(
        address,
        f"/jobs/{jid}/stop",
        {"targetDirectory": directory.resolve().as_uri(), "drain": False},
    )
    deadline = time.monotonic() + timeout_s
    while True:
        status = rest(address, f"/jobs/{jid}/savepoints/{trigger['request-id']}")
        if status["status"]["id"] == "COMPLETED":
            operation = status.get("operation") or {}
            if "location" not in operation:
                cause = operation.get("failure-cause", {}).get("stack-trace", "")[:2000]
                raise StackError(f"the savepoint of job {jid} failed: {cause}")
            wait_state(address, jid, ("FINISHED",), timeout_s=timeout_s)
            return str(operation["location"])
        if time.monotonic() > deadline:
            raise StackError(f"no savepoint of job {jid} after {timeout_s}s")
        time.sleep(0.5)


def upgrade(
    job: str,
    address: str,
    job_args: list[str],
    savepoints: Path,
    submit: Callable[[list[str]], int],
    say: Callable[[str], None] = print,
) -> int:
    """Stop the running `job` with a savepoint under `savepoints`, then `submit` the job (the
    new code) with `job_args` and `--restore-from` that savepoint; submit's exit code."""
    jid = active_job(address, job)
    wait_tasks_running(address, jid)
    say(f"upgrade {job}: stopping job {jid} with a savepoint")
    location = stop_with_savepoint(address, jid, savepoints / job)
    say(f"upgrade {job}: savepoint {location}; submitting the package's code from it")
    code = submit([*job_args, "--restore-from", location])
    if code == 0:
        say(f"upgrade {job}: running {active_job(address, job)} from {location}")
    return code
