"""Processes for integration tests: free ports, the `modstream` command as a user runs it, and
what is still running."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from modstream.core.config import PROJECT_ROOT


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def modstream(
    env: dict[str, str], *args: str, timeout_s: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run the `modstream` command as a user would, in the project, bounded in time."""
    return subprocess.run(
        [sys.executable, "-m", "modstream.cli.main", *args],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def running_processes_mentioning(marker: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(f"{entry.name}: {cmdline[:120]}")
    return found
