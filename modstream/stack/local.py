"""The local stack: one KRaft Kafka broker and one Redis, on 127.0.0.1, owned by pid files.

Both run from the project's run directory (data, logs, pid files). They are stopped by the pid
each start recorded, after checking that the pid still belongs to the process we started (its
command line names our run directory or port), never by process name.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modstream.core.config import LOCALHOST, SHADED_KAFKA, Settings
from modstream.core.limits import BROKER_MESSAGE_MAX_BYTES
from modstream.stack.service import (  # re-exported: the stack's API
    Service,
    ServiceStatus,
    StackError,
    port_open,
)

__all__ = ["Kafka", "Redis", "Service", "ServiceStatus", "StackError", "port_open"]

# Sinks use 10 minutes (modstream/jobs/runtime.py); the broker must allow at least that.
TRANSACTION_MAX_TIMEOUT_MS = 900_000


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

    @property
    def protocol(self) -> str:
        """The clients' listener: PLAINTEXT, or SASL_PLAINTEXT with SCRAM when the settings
        ask for SASL (its user is made when the storage is formatted)."""
        kafka = self.settings.kafka
        if kafka.security_protocol == "PLAINTEXT":
            return "PLAINTEXT"
        if kafka.security_protocol == "SASL_PLAINTEXT" and (kafka.sasl_mechanism or "").startswith(
            "SCRAM-"
        ):
            return "SASL_PLAINTEXT"
        raise StackError(
            f"the local broker runs PLAINTEXT or SASL_PLAINTEXT with SCRAM, not "
            f"{kafka.security_protocol} {kafka.sasl_mechanism or ''}; for TLS point "
            "MODSTREAM_KAFKA__BOOTSTRAP_SERVERS at your own broker (docs/CONFIG.md)"
        )

    def _sasl_properties(self) -> list[str]:
        kafka = self.settings.kafka
        if self.protocol != "SASL_PLAINTEXT" or kafka.sasl_mechanism is None:
            return []
        mechanism = kafka.sasl_mechanism
        # The broker runs the Kafka client classes unshaded.
        jaas = kafka.java_properties()["sasl.jaas.config"].removeprefix(SHADED_KAFKA)
        return [
            f"sasl.enabled.mechanisms={mechanism}",
            f"sasl.mechanism.inter.broker.protocol={mechanism}",
            f"listener.name.sasl_plaintext.{mechanism.lower()}.sasl.jaas.config={jaas}",
            f"super.users=User:{kafka.sasl_username}",
        ]

    def properties(self) -> str:
        s = self.settings
        protocol = self.protocol
        return "\n".join(
            [
                "# Written by `modstream up`; edit modstream/stack/local.py instead.",
                "process.roles=broker,controller",
                "node.id=1",
                f"controller.quorum.bootstrap.servers={LOCALHOST}:{s.controller_port}",
                f"listeners={protocol}://{LOCALHOST}:{s.kafka_port},CONTROLLER://{LOCALHOST}:{s.controller_port}",
                f"advertised.listeners={protocol}://{LOCALHOST}:{s.kafka_port}",
                "controller.listener.names=CONTROLLER",
                f"inter.broker.listener.name={protocol}",
                f"listener.security.protocol.map={protocol}:{protocol},CONTROLLER:PLAINTEXT",
                *self._sasl_properties(),
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
                # modstream's own limit is 1 MiB a record (modstream/contract/common.py); the broker
                # takes up to 4 MiB so an over-long record reaches a job, and the DLQ, instead of
                # being refused to its producer.
                f"message.max.bytes={BROKER_MESSAGE_MAX_BYTES}",
                "",
            ]
        )

    def prepare(self) -> None:
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        self.properties_file.write_text(self.properties())
        self.properties_file.chmod(0o600)  # it may hold the SASL user's password
        user = self.settings.kafka.sasl_username if self.protocol != "PLAINTEXT" else ""
        user_file = self.home / "scram.user"
        if (self.data_dir / "meta.properties").exists():
            made = user_file.read_text().strip() if user_file.exists() else ""
            if user and made != user:
                raise StackError(
                    f"the broker in {self.data_dir} was formatted without the SASL user {user!r} "
                    "(users are made at the first `modstream up`); `modstream clean` first"
                )
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
            *self._scram_user(),
        )
        user_file.write_text(f"{user}\n")

    def _scram_user(self) -> list[str]:
        """`--add-scram` for the clients' SASL user, when the listener is SASL."""
        kafka = self.settings.kafka
        if self.protocol == "PLAINTEXT" or kafka.sasl_password is None:
            return []
        password = kafka.sasl_password.get_secret_value()
        if any(char in password + (kafka.sasl_username or "") for char in ",[]="):
            raise StackError(
                "the local broker's SASL user and password cannot hold `,`, `[`, `]` or `=` "
                "(kafka-storage --add-scram)"
            )
        return [
            "--add-scram",
            f"{kafka.sasl_mechanism}=[name={kafka.sasl_username},password={password}]",
        ]

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
        options = self.settings.kafka.python_options()
        return broker_reachable(self.settings.bootstrap_servers, 5.0, options) is None


def broker_reachable(
    bootstrap_servers: str, timeout_s: float, options: dict[str, Any] | None = None
) -> str | None:
    """None when the broker answers a metadata request within timeout_s, else why not.
    `options`: the clients' security (Settings.kafka.python_options())."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    timeout_ms = int(timeout_s * 1000)
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=bootstrap_servers,
            request_timeout_ms=timeout_ms,
            bootstrap_timeout_ms=timeout_ms,
            client_id="modstream-health",
            **(options or {}),
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
            # AUTH, when the Redis URL has a password: read from this file (not a command-line
            # argument, which every local user could read).
            "--include",
            str(self.auth_file),
        ]

    @property
    def auth_file(self) -> Path:
        return self.home / "auth.conf"

    def prepare(self) -> None:
        (self.home / "data").mkdir(parents=True, exist_ok=True)
        password = self.password()
        self.auth_file.touch(mode=0o600)
        self.auth_file.chmod(0o600)
        if password is not None and any(char in password for char in '"\n\r\\'):
            raise StackError("the local Redis password cannot hold quotes, backslashes or newlines")
        self.auth_file.write_text(f'requirepass "{password}"\n' if password else "")

    def password(self) -> str | None:
        """The password of the Redis URL, when there is one."""
        from urllib.parse import unquote, urlsplit

        password = urlsplit(self.settings.redis_url).password
        return unquote(password) if password else None

    def healthy(self) -> bool:
        import redis

        try:
            client = redis.Redis.from_url(
                self.settings.redis_url, socket_timeout=2, socket_connect_timeout=2
            )
            return bool(client.ping())
        except (redis.RedisError, OSError):
            return False


def services(settings: Settings) -> list[Service]:
    """The services `modstream up` runs: those the settings do not point elsewhere."""
    local: list[Service] = []
    if settings.local_kafka:
        local.append(Kafka(settings))
    if settings.local_redis:
        local.append(Redis(settings))
    return local


def external(settings: Settings) -> list[str]:
    """What the settings point at outside the local stack, said as `modstream up` says it."""
    lines = []
    if not settings.local_kafka:
        lines.append(f"kafka: external at {settings.bootstrap_servers}, not started here")
    if not settings.local_redis:
        lines.append("redis: external (MODSTREAM_REDIS__URL), not started here")
    return lines


def up(settings: Settings, say: Callable[[str], None] = print) -> None:
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    for line in external(settings):
        say(line)
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


# What modstream writes under the run directory; `clean` removes these and nothing else (the
# run directory may be one a user chose, MODSTREAM_RUN_DIR, holding files of their own).
RUN_DIR_ENTRIES = (
    "kafka", "redis", "archive", "demo", "checkpoints", "savepoints", "flink", "flink-cluster",
    "package", "media", "bench",
)  # fmt: skip


def clean(settings: Settings, say: Callable[[str], None] = print) -> list[Path]:
    """Stop the stack, then remove its data (topics, Redis, the archives, demo runs,
    checkpoints): what survives `down` and `up` until this. Refuses while a Flink session
    cluster of this run directory is running."""
    from modstream.stack import cluster

    if cluster.daemon_pids(settings, "taskexecutor") or cluster.daemon_pids(
        settings, "standalonesession"
    ):
        raise StackError("a Flink session cluster runs from this run directory: "
                         "`modstream cluster down` first")  # fmt: skip
    down(settings, say)
    removed = []
    for name in RUN_DIR_ENTRIES:
        path = settings.run_dir / name
        if path.exists():
            shutil.rmtree(path)
            removed.append(path)
            say(f"removed {path}")
    if not removed:
        say(f"clean: nothing to remove in {settings.run_dir}")
    return removed


def status(settings: Settings) -> list[ServiceStatus]:
    return [service.status() for service in services(settings)]
