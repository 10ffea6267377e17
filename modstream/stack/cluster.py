"""A local Flink standalone session cluster from the PyFlink wheel, and job submission to it.

`modstream cluster up` builds a Flink home in RUN_DIR/flink-cluster (the wheel's scripts and
jars, plus flink-python in lib/: with it, a TaskManager runs more than one thread-mode job on
Java 17, FLINK-37727) with its own configuration (ports, pid and log directories, thread mode)
and starts one JobManager and one TaskManager. Neither is given modstream or a Python to run it:
no PYTHONPATH, no `python.executable`. `modstream submit JOB --jobmanager HOST:PORT` hands a
job everything its Python operators need through `flink run` (modstream/stack/package.py): the code
(`-pyfs`), a relocatable Python with the dependencies (`-pyarch`, `-pyexec`) and the jars.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modstream.core.config import LOCALHOST, SUBMIT_PACKAGE_ENV, Settings
from modstream.core.endpoints import CLUSTER_METRICS_PORTS, PROMETHEUS_FACTORY
from modstream.stack.package import ENV_NAME, PYTHON_EXEC, Package, default_dir
from modstream.stack.package import build as build_package
from modstream.stack.service import StackError, port_open

# What `modstream submit` submits: jobs/<name>.py, each a PyFlink job with its own options.
JOBS = ("moderation", "scan", "enforce", "reconciler")
# A cluster made for this checkout's tests of faults (tests/faults/harness.py): its TaskManagers
# run this virtualenv's Python and code (PYTHONPATH), as before `modstream package` existed, so
# a killed TaskManager's successor does not unpack a Python archive before the restore whose
# timing the fault test measures. Never for a deployment: `up(local_python=True)` only.
LOCAL_PYTHON_MARKER = "local-python"


def pyflink_home() -> Path:
    import pyflink

    return Path(pyflink.__file__).resolve().parent


def home(settings: Settings) -> Path:
    return settings.run_dir / "flink-cluster"


def _configuration(settings: Settings, rest_port: int, rpc_port: int, slots: int) -> str:
    run = home(settings)
    return "\n".join(
        [
            "# Written by `modstream cluster up`.",
            f"jobmanager.rpc.address: {LOCALHOST}",
            f"jobmanager.rpc.port: {rpc_port}",
            f"jobmanager.bind-host: {LOCALHOST}",
            "jobmanager.memory.process.size: 1024m",
            f"taskmanager.bind-host: {LOCALHOST}",
            f"taskmanager.host: {LOCALHOST}",
            f"taskmanager.numberOfTaskSlots: {slots}",
            "taskmanager.memory.process.size: 2048m",
            f"rest.address: {LOCALHOST}",
            f"rest.bind-address: {LOCALHOST}",
            f"rest.port: {rest_port}",
            f"env.pid.dir: {run / 'pids'}",
            f"env.log.dir: {run / 'log'}",
            # A JobManager setting: a job's own value is not read on a session cluster, where
            # only the newest checkpoint was kept, so a restore had nothing to fall back to
            # when the broker had aborted that checkpoint's transactions
            # (modstream/jobs/restore.py).
            "execution.checkpointing.num-retained: 3",
            "python.execution-mode: thread",
            # Flink's Prometheus reporter, from plugins/metrics-prometheus (docs/OPERATIONS.md).
            f"metrics.reporter.prom.factory.class: {PROMETHEUS_FACTORY}",
            f"metrics.reporter.prom.port: {CLUSTER_METRICS_PORTS}",
            "",
        ]
    )


def up(
    settings: Settings,
    *,
    rest_port: int = 8081,
    rpc_port: int = 6123,
    slots: int = 1,
    say: Callable[[str], None] = print,
    conf: dict[str, str] | None = None,
    local_python: bool = False,
) -> str:
    """Start the cluster (or say it is up); return its REST address HOST:PORT. With
    `local_python`, its TaskManagers run this checkout's Python (LOCAL_PYTHON_MARKER)."""
    address = f"{LOCALHOST}:{rest_port}"
    if port_open(rest_port):
        if _overview(address) is not None:
            say(f"flink cluster: already up at {address}")
            return address
        raise StackError(f"port {rest_port} is in use by something that is not a Flink cluster")
    run = home(settings)
    _build_home(run, pyflink_home())
    marker = run / LOCAL_PYTHON_MARKER
    if local_python:
        marker.write_text(f"{sys.executable}\n")
        conf = {"python.executable": sys.executable, **(conf or {})}
    else:
        marker.unlink(missing_ok=True)
    (run / "conf" / "masters").write_text(f"{LOCALHOST}:{rest_port}\n")
    (run / "conf" / "workers").write_text(f"{LOCALHOST}\n")
    (run / "conf" / "config.yaml").write_text(
        _overridden(_configuration(settings, rest_port, rpc_port, slots), conf or {})
    )
    _script(run, "start-cluster.sh", check=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        overview = _overview(address)
        if overview is not None and overview.get("taskmanagers", 0) >= 1:
            say(f"flink cluster: up at {address} ({overview['slots-total']} slot(s), home {run})")
            return address
        time.sleep(1)
    raise StackError(f"the Flink cluster did not come up; logs in {run / 'log'}")


def _build_home(run: Path, source: Path) -> None:
    """A Flink home at `run` from the wheel's (`source`): its scripts copied, its jars linked
    (flink-python in lib/ too), its logging configuration copied; an earlier one's replaced."""
    if run.exists():
        shutil.rmtree(run / "bin", ignore_errors=True)
        shutil.rmtree(run / "lib", ignore_errors=True)
        shutil.rmtree(run / "opt", ignore_errors=True)
    for folder in ("lib", "opt", "conf", "log", "pids", "plugins"):
        (run / folder).mkdir(parents=True, exist_ok=True)
    shutil.copytree(source / "bin", run / "bin")  # a copy: the scripts find their home from it
    for jar in [*(source / "lib").glob("*.jar"), *(source / "opt").glob("flink-python-*.jar")]:
        (run / "lib" / jar.name).symlink_to(jar)
    for jar in (source / "opt").glob("*.jar"):
        (run / "opt" / jar.name).symlink_to(jar)
    reporter = run / "plugins" / "metrics-prometheus"
    if not reporter.exists() and (source / "plugins" / "metrics-prometheus").is_dir():
        reporter.symlink_to(source / "plugins" / "metrics-prometheus")
    for name in (
        "log4j.properties",
        "log4j-console.properties",
        "log4j-cli.properties",
        "logback.xml",
    ):
        if (source / "conf" / name).exists():
            shutil.copy(source / "conf" / name, run / "conf" / name)


def _overridden(configuration: str, conf: dict[str, str]) -> str:
    """The configuration with `conf`'s keys set (a key given twice is not valid YAML)."""
    kept = [line for line in configuration.splitlines() if line.split(":", 1)[0] not in conf]
    return "\n".join([*kept, *(f"{key}: {value}" for key, value in conf.items()), ""])


def down(settings: Settings, say: Callable[[str], None] = print) -> None:
    """Stop what `up` started, by the pid files Flink's own scripts recorded."""
    run = home(settings)
    if not (run / "bin" / "stop-cluster.sh").exists():
        say("flink cluster: not running")
        return
    _script(run, "stop-cluster.sh", check=False)
    # stop-cluster.sh stops one TaskManager per line of conf/workers; those `start_taskmanager`
    # added are in the pid file too, and stop-all stops every one it lists.
    _script(run, "taskmanager.sh", "stop-all", check=False)
    say("flink cluster: stopped")


def script_env(run: Path) -> dict[str, str]:
    """The environment of Flink's scripts for the cluster at `run`: its configuration, and
    nothing that would hand its TaskManagers a Python: no PYTHONPATH, PYTHONHOME or virtualenv
    (jobs bring theirs, `submit`), no other FLINK_* variable. A py4j gateway started in this
    process (any job's `create_env`) sets FLINK_HOME and FLINK_LIB_DIR to the wheel, whose lib/
    lacks flink-python: inherited, they made the cluster's JobManager refuse every Python job
    (ClassNotFoundException: EmbeddedPythonProcessOperator; the fault test in `make test`, after
    tests/integration/test_end_offsets.py had started a gateway)."""
    if (run / LOCAL_PYTHON_MARKER).exists():
        kept = {key: value for key, value in os.environ.items() if not key.startswith("FLINK_")}
        return {**kept, "FLINK_CONF_DIR": str(run / "conf"), "PYTHONPATH": _local_python_path()}
    dropped = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("FLINK_") and key not in dropped
    }
    venv_bin = str(Path(sys.prefix) / "bin")
    path = [entry for entry in env.get("PATH", "").split(os.pathsep) if entry != venv_bin]
    return {**env, "PATH": os.pathsep.join(path), "FLINK_CONF_DIR": str(run / "conf")}


def _local_python_path() -> str:
    import site

    from modstream.core.config import PROJECT_ROOT

    return os.pathsep.join([str(PROJECT_ROOT), *site.getsitepackages()])


def _script(run: Path, name: str, *args: str, check: bool) -> None:
    """One of Flink's cluster scripts, on this cluster's configuration (`script_env`)."""
    env = script_env(run)
    subprocess.run(
        [str(run / "bin" / name), *args], env=env, check=check, capture_output=True, timeout=120
    )


def _overview(address: str) -> dict[str, int] | None:
    try:
        with urllib.request.urlopen(f"http://{address}/overview", timeout=3) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None


def submit(
    job: str,
    jobmanager: str,
    job_args: list[str],
    *,
    package: Package | None = None,
    savepoint: str | None = None,
    flink_home: Path | None = None,
    output: Any = None,
    env: dict[str, str] | None = None,
    local: bool = False,
) -> int:
    """`flink run -d` the job's module on the cluster at `jobmanager` (its REST address), its
    code and Python from `package` (built in RUN_DIR/package when not given), from `savepoint`
    when given. The job's main runs here (`-pyclientexec`: this interpreter); its operators
    run on the TaskManagers in the package's Python."""
    if job not in JOBS:
        raise StackError(f"unknown job {job!r}: one of {', '.join(JOBS)}")
    if _overview(jobmanager) is None:
        raise StackError(f"no Flink cluster answers at {jobmanager}")
    if local:  # a cluster `up(local_python=True)` made: this checkout's code and Python
        return _submit_local(job, jobmanager, job_args, savepoint, flink_home, output, env)
    if package is None:
        settings = Settings.from_env()
        package = build_package(default_dir(settings), settings)
    flink_home = flink_home or Path(os.environ.get("FLINK_HOME") or pyflink_home())
    command = [
        str(flink_home / "bin" / "flink"),
        "run",
        "-m",
        jobmanager,
        "-d",
        *(["--fromSavepoint", savepoint] if savepoint else []),
        "-pym",
        f"modstream.jobs.{job}",
        "-pyfs",
        str(package.code),
        "-pyarch",
        f"{package.env}#{ENV_NAME}",
        "-pyexec",
        PYTHON_EXEC,
        "-pyclientexec",
        sys.executable,
        "--",
        *job_args,
        "--detached",
    ]
    # The job's main lists the package's jars in pipeline.jars, and leaves python.executable
    # to -pyexec (modstream/jobs/runtime.py create_env).
    client_env = {**(env or os.environ), SUBMIT_PACKAGE_ENV: str(package.root)}
    return subprocess.run(
        command, check=False, timeout=300, stdout=output, stderr=output, env=client_env
    ).returncode


def _submit_local(
    job: str,
    jobmanager: str,
    job_args: list[str],
    savepoint: str | None,
    flink_home: Path | None,
    output: Any,
    env: dict[str, str] | None,
) -> int:

    flink_home = flink_home or Path(os.environ.get("FLINK_HOME") or pyflink_home())
    command = [
        str(flink_home / "bin" / "flink"),
        *("run", "-m", jobmanager, "-d"),
        *(["--fromSavepoint", savepoint] if savepoint else []),
        *("-pym", f"modstream.jobs.{job}"),
        *("-pyclientexec", sys.executable, "-pyexec", sys.executable),
        *("--", *job_args, "--detached"),
    ]
    return subprocess.run(
        command, check=False, timeout=300, stdout=output, stderr=output, env=env
    ).returncode


def start_taskmanager(settings: Settings) -> None:
    """One more TaskManager for the cluster `up` started (after one was killed: its jobs wait
    for slots); Flink's script appends its pid to the cluster's pid file."""
    run = home(settings)
    env = script_env(run)
    subprocess.run(
        [str(run / "bin" / "taskmanager.sh"), "start"],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )


def daemon_pids(settings: Settings, daemon: str = "taskexecutor") -> list[int]:
    """The live pids of this cluster's `taskexecutor` (or `standalonesession`) daemons, from
    the pid files Flink's scripts wrote, each checked to be a Java process of this cluster."""
    pids: list[int] = []
    for pid_file in (home(settings) / "pids").glob(f"flink-*-{daemon}.pid"):
        for line in pid_file.read_text().split():
            try:
                cmdline = Path(f"/proc/{int(line)}/cmdline").read_bytes()
            except (OSError, ValueError):
                continue
            if str(home(settings)).encode() in cmdline:
                pids.append(int(line))
    return pids
