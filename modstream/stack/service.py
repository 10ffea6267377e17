"""A local process started from the run directory and tracked by its pid file: the base of
the local stack's services (modstream/stack/local.py). Stopped by the pid its start recorded, after
checking that the pid still belongs to the process we started, never by process name."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from modstream.core.config import LOCALHOST, Settings

START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0


class StackError(RuntimeError):
    """A service could not be started, reached or stopped; the message says which and why."""


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    pid: int | None
    address: str
    running: bool
    healthy: bool
    log: Path

    def line(self) -> str:
        if not self.running:
            return f"{self.name:<6} stopped   {self.address:<22} log {self.log}"
        state = "healthy" if self.healthy else "starting"
        return f"{self.name:<6} {state:<9} {self.address:<22} pid {self.pid}  log {self.log}"


def port_open(port: int, host: str = LOCALHOST, timeout_s: float = 0.5) -> bool:
    """True when something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class Service:
    """A local process started from the run directory and tracked by its pid file."""

    name = "service"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.home = settings.run_dir / self.name
        self.pid_file = self.home / f"{self.name}.pid"
        self.log_file = self.home / "logs" / f"{self.name}.out"

    # What each service defines.
    @property
    def ports(self) -> list[int]:
        raise NotImplementedError

    def command(self) -> list[str]:
        raise NotImplementedError

    def identity(self) -> str:
        """A string that the command line of our process contains (guards against pid reuse)."""
        raise NotImplementedError

    def prepare(self) -> None:
        """Create directories and configuration before the first start."""

    def healthy(self) -> bool:
        raise NotImplementedError

    # Shared lifecycle.
    @property
    def address(self) -> str:
        return f"{LOCALHOST}:{self.ports[0]}"

    def pid(self) -> int | None:
        """The recorded pid if that process is alive and still ours."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        if self.identity() in _cmdline(pid):
            return pid
        return None

    def status(self) -> ServiceStatus:
        pid = self.pid()
        return ServiceStatus(
            self.name,
            pid,
            self.address,
            pid is not None,
            pid is not None and self.healthy(),
            self.log_file,
        )

    def start(self, say: Callable[[str], None] = print) -> None:
        if self.pid() is not None:
            if not self._wait_healthy(None):
                raise StackError(
                    f"{self.name} runs (pid {self.pid()}) but is not healthy; see {self.log_file}"
                )
            say(f"{self.name}: already up at {self.address} (pid {self.pid()})")
            return
        busy = [port for port in self.ports if port_open(port)]
        if busy:
            raise StackError(
                f"{self.name}: port(s) {busy} on {LOCALHOST} are in use by a process modstream did "
                f"not start; stop it or choose other ports (see README, 'Configuration')"
            )
        self.prepare()
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            process = subprocess.Popen(
                self.command(),
                cwd=self.home,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.pid_file.write_text(f"{process.pid}\n")
        started = time.monotonic()
        if not self._wait_healthy(process):
            self.stop(say=lambda _: None)
            raise StackError(
                f"{self.name} did not become healthy within {START_TIMEOUT_S:.0f}s; last log lines "
                f"of {self.log_file}:\n{_tail(self.log_file)}"
            )
        say(
            f"{self.name}: up at {self.address} (pid {process.pid}, "
            f"{time.monotonic() - started:.1f}s)"
        )

    def _wait_healthy(self, process: subprocess.Popen[bytes] | None) -> bool:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                return False
            if all(port_open(port) for port in self.ports) and self.healthy():
                return True
            time.sleep(0.5)
        return False

    def stop(self, say: Callable[[str], None] = print) -> None:
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            say(f"{self.name}: not running")
            return
        os.kill(pid, signal.SIGTERM)
        if not self._wait_gone(pid, STOP_TIMEOUT_S):
            say(f"{self.name}: pid {pid} ignored SIGTERM for {STOP_TIMEOUT_S:.0f}s, killing it")
            os.kill(pid, signal.SIGKILL)
            self._wait_gone(pid, 10.0)
        self.pid_file.unlink(missing_ok=True)
        deadline = time.monotonic() + 10.0
        while any(port_open(port) for port in self.ports) and time.monotonic() < deadline:
            time.sleep(0.2)
        say(f"{self.name}: stopped (pid {pid})")

    def _wait_gone(self, pid: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                # Reap it if it is our child (the CLI that started it may still be alive).
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return True
            except ChildProcessError:
                pass
            if not Path(f"/proc/{pid}").exists() or "Z" in _proc_state(pid):
                return True
            time.sleep(0.2)
        return False


def _proc_state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[0]
