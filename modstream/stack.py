"""The local stack: one KRaft Kafka broker and one Redis, on 127.0.0.1, owned by pid files.

Both run from the project's run directory (data, logs, pid files). They are stopped by the pid
each start recorded, after checking that the pid still belongs to the process we started (its
command line names our run directory or port), never by process name.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from modstream.config import LOCALHOST, Settings

START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
# Sinks use 10 minutes (jobs/runtime.py); the broker must allow at least that.
TRANSACTION_MAX_TIMEOUT_MS = 900_000
BROKER_MESSAGE_MAX_BYTES = 4 * 1024 * 1024


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


class Kafka(Service):
    """A single-node KRaft broker+controller, formatted once with transactions V1.

    Transactions V1 because of FLINK-40689: with V2 (the default for storage formatted by Kafka
    4.0+), KafkaSink recovery breaks after a producer-epoch rollover.
    """

    name = "kafka"

    @property
    def ports(self) -> list[int]:
        return [self.settings.kafka_port, self.settings.controller_port]

    @property
    def properties_file(self) -> Path:
        return self.home / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    def identity(self) -> str:
        return str(self.properties_file)

    def _java(self, main_class: str, *args: str) -> list[str]:
        jars = self.settings.kafka_jars
        if not any(jars.glob("kafka_2.13-*.jar")):
            raise StackError(f"no Kafka broker jars in {jars}; run `make setup` first")
        log4j = self.settings.project_root / "deploy" / "local" / "log4j2-kafka.properties"
        java = shutil.which("java")
        if java is None:
            raise StackError("java is not on PATH; Kafka needs Java 17 (see README)")
        return [
            java,
            "-Xms256m",
            "-Xmx768m",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j}",
            f"-Dkafka.logs.dir={self.home / 'logs'}",
            "-cp",
            f"{jars}/*",
            main_class,
            *args,
        ]

    def command(self) -> list[str]:
        return self._java("kafka.Kafka", str(self.properties_file))

    def properties(self) -> str:
        s = self.settings
        return "\n".join(
            [
                "# Written by `modstream up`; edit modstream/stack.py instead.",
                "process.roles=broker,controller",
                "node.id=1",
                f"controller.quorum.bootstrap.servers={LOCALHOST}:{s.controller_port}",
                f"listeners=PLAINTEXT://{LOCALHOST}:{s.kafka_port},CONTROLLER://{LOCALHOST}:{s.controller_port}",
                f"advertised.listeners=PLAINTEXT://{LOCALHOST}:{s.kafka_port}",
                "controller.listener.names=CONTROLLER",
                "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                f"log.dirs={self.data_dir}",
                "num.partitions=1",
                "default.replication.factor=1",
                "min.insync.replicas=1",
                "auto.create.topics.enable=false",
                "offsets.topic.replication.factor=1",
                "offsets.topic.num.partitions=4",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "transaction.state.log.num.partitions=4",
                f"transaction.max.timeout.ms={TRANSACTION_MAX_TIMEOUT_MS}",
                "group.initial.rebalance.delay.ms=0",
                "num.network.threads=2",
                "num.io.threads=4",
                "log.retention.hours=168",
                # modstream's own limit is 1 MiB a record (schemas/common.py); the broker takes up
                # to 4 MiB so an over-long record reaches a job, and the DLQ, instead of being
                # refused to its producer.
                f"message.max.bytes={BROKER_MESSAGE_MAX_BYTES}",
                "",
            ]
        )

    def prepare(self) -> None:
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        self.properties_file.write_text(self.properties())
        if (self.data_dir / "meta.properties").exists():
            return
        cluster_id_file = self.home / "cluster.id"
        if not cluster_id_file.exists():
            cluster_id = self._run_tool("random-uuid").strip().splitlines()[-1]
            cluster_id_file.write_text(cluster_id + "\n")
        self._run_tool(
            "format",
            "--standalone",
            "-t",
            cluster_id_file.read_text().strip(),
            "-c",
            str(self.properties_file),
            "--feature",
            "transaction.version=1",
        )

    def _run_tool(self, *args: str) -> str:
        result = subprocess.run(
            self._java("kafka.tools.StorageTool", *args),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if result.returncode != 0:
            raise StackError(
                f"kafka storage tool {args[0]} failed:\n{result.stdout}{result.stderr}"
            )
        return result.stdout

    def healthy(self) -> bool:
        return broker_reachable(self.settings.bootstrap_servers, timeout_s=5.0) is None


def broker_reachable(bootstrap_servers: str, timeout_s: float) -> str | None:
    """None when the broker answers a metadata request within timeout_s, else why not."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    timeout_ms = int(timeout_s * 1000)
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=bootstrap_servers,
            request_timeout_ms=timeout_ms,
            bootstrap_timeout_ms=timeout_ms,
            client_id="modstream-health",
        )
    except (KafkaError, OSError, ValueError) as error:
        return f"{type(error).__name__}: {error}"
    try:
        admin.list_topics()
    except (KafkaError, OSError) as error:
        return f"{type(error).__name__}: {error}"
    finally:
        admin.close()
    return None


class Redis(Service):
    """redis-server from Debian, append-only file in the run directory."""

    name = "redis"

    @property
    def ports(self) -> list[int]:
        return [self.settings.redis_port]

    def identity(self) -> str:
        # redis-server rewrites its process title to "redis-server 127.0.0.1:PORT".
        return f"{LOCALHOST}:{self.settings.redis_port}"

    def command(self) -> list[str]:
        binary = shutil.which("redis-server")
        if binary is None:
            raise StackError(
                "redis-server is not installed; run `make setup` (apt-get install redis-server)"
            )
        return [
            binary,
            "--bind",
            LOCALHOST,
            "--port",
            str(self.settings.redis_port),
            "--dir",
            str(self.home / "data"),
            "--appendonly",
            "yes",
            "--save",
            "",
            "--daemonize",
            "no",
            "--protected-mode",
            "yes",
            "--loglevel",
            "notice",
        ]

    def prepare(self) -> None:
        (self.home / "data").mkdir(parents=True, exist_ok=True)

    def healthy(self) -> bool:
        import redis

        try:
            return bool(
                redis.Redis(
                    host=LOCALHOST,
                    port=self.settings.redis_port,
                    socket_timeout=2,
                    socket_connect_timeout=2,
                ).ping()
            )
        except (redis.RedisError, OSError):
            return False


def services(settings: Settings) -> list[Service]:
    return [Kafka(settings), Redis(settings)]


def up(settings: Settings, say: Callable[[str], None] = print) -> None:
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    for service in services(settings):
        service.start(say)


def down(settings: Settings, say: Callable[[str], None] = print) -> None:
    errors = []
    for service in reversed(services(settings)):
        try:
            service.stop(say)
        except OSError as error:
            errors.append(f"{service.name}: {error}")
    if errors:
        raise StackError("; ".join(errors))


def status(settings: Settings) -> list[ServiceStatus]:
    return [service.status() for service in services(settings)]
