"""modstream's settings, in one place: a TOML file plus environment overrides (pydantic-settings),
with local defaults that run the stack of `modstream up` on 127.0.0.1.

Where each setting comes from, first match wins:
1. an environment variable: `MODSTREAM_<NAME>` for a top-level setting, `MODSTREAM_<TABLE>__<NAME>`
   for one in a table (`MODSTREAM_KAFKA__SASL_PASSWORD`); an empty variable counts as unset;
2. the TOML file named by `MODSTREAM_CONFIG` (default: `modstream.toml` in the project root, when
   it exists), top-level keys and tables `[kafka]`, `[redis]`, `[topics]`;
3. the defaults below.
docs/CONFIG.md lists every setting; `modstream config show` prints what one process resolves.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)
from pydantic_settings.sources.utils import parse_env_vars

LogFormat = Literal["text", "json"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]

PROJECT_ROOT = Path(__file__).resolve().parents[2]
LOCALHOST = "127.0.0.1"
ENV_PREFIX = "MODSTREAM_"
CONFIG_VARIABLE = "MODSTREAM_CONFIG"
# Set for a job's main under `flink run` (modstream/stack/cluster.py `submit`): the folder of the
# package it was submitted from (modstream/stack/package.py), whose jars and Python the job uses
# (modstream/jobs/runtime.py).
SUBMIT_PACKAGE_ENV = "MODSTREAM_SUBMIT_PACKAGE"
DEFAULT_CONFIG_FILE = "modstream.toml"

# Kafka client properties modstream sets itself (exactly-once, restore, its serializers):
# neither a job option nor the settings' `kafka.properties` may change them.
OWN_CLIENT_PROPERTIES = frozenset(
    {
        "bootstrap.servers", "group.id", "client.id.prefix", "isolation.level",
        "transactional.id", "transaction.timeout.ms", "enable.idempotence", "acks",
        "key.deserializer", "value.deserializer", "key.serializer", "value.serializer",
    }
)  # fmt: skip
# The Flink Kafka connector (flink-sql-connector-kafka) shades the Kafka client under this
# package: a JAAS line for the jobs names the shaded login module (a class name in
# `kafka.properties` must be shaded too).
SHADED_KAFKA = "org.apache.flink.kafka.shaded."
_LOGIN_MODULE = {
    "PLAIN": SHADED_KAFKA + "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": SHADED_KAFKA + "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": SHADED_KAFKA + "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class KafkaSettings(BaseModel):
    """How every modstream client reaches Kafka: the Flink jobs' source and sink, their
    restore and end-offset checks, and every command (`MODSTREAM_KAFKA__<NAME>`, `[kafka]`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # None: the local stack's broker (127.0.0.1:kafka_port).
    bootstrap_servers: str | None = None
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    # PEM file of the CA that signed the brokers' certificates (SSL, SASL_SSL).
    ssl_cafile: Path | None = None
    # More properties for the Java clients (Flink's source and sink, the end-offset checks), as
    # Kafka names them (`ssl.endpoint.identification.algorithm`); never one modstream sets.
    properties: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _complete(self) -> KafkaSettings:
        own = sorted(OWN_CLIENT_PROPERTIES & set(self.properties))
        if own:
            raise ValueError(f"properties {own} are set by modstream, not in the settings")
        sasl = self.security_protocol.startswith("SASL_")
        if sasl and not (self.sasl_mechanism and self.sasl_username and self.sasl_password):
            raise ValueError(
                f"security_protocol {self.security_protocol} needs sasl_mechanism, "
                "sasl_username and sasl_password"
            )
        if not sasl and self.sasl_mechanism:
            raise ValueError(
                f"sasl_mechanism is set but security_protocol is {self.security_protocol}"
            )
        return self

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    def java_properties(self) -> dict[str, str]:
        """The security settings as the Flink jobs' Kafka client properties (the connector's
        shaded client), then `properties`."""
        props: dict[str, str] = {"security.protocol": self.security_protocol}
        if self.sasl and self.sasl_mechanism and self.sasl_password is not None:
            password = self.sasl_password.get_secret_value()
            props["sasl.mechanism"] = self.sasl_mechanism
            user = _jaas(self.sasl_username)
            props["sasl.jaas.config"] = (
                f'{_LOGIN_MODULE[self.sasl_mechanism]} required username="{user}"'
                f' password="{_jaas(password)}";'
            )
        if self.ssl_cafile is not None:
            props["ssl.truststore.type"] = "PEM"
            props["ssl.truststore.location"] = str(self.ssl_cafile)
        return {**props, **self.properties}

    def python_options(self) -> dict[str, Any]:
        """The security settings as kafka-python keyword arguments (every client takes them)."""
        options: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.sasl and self.sasl_password is not None:
            options["sasl_mechanism"] = self.sasl_mechanism
            options["sasl_plain_username"] = self.sasl_username
            options["sasl_plain_password"] = self.sasl_password.get_secret_value()
        if self.ssl_cafile is not None:
            options["ssl_cafile"] = str(self.ssl_cafile)
        return options


def _jaas(value: str | None) -> str:
    """A value quoted for a JAAS line: its backslashes and quotes escaped."""
    return (value or "").replace("\\", "\\\\").replace('"', '\\"')


class RedisSettings(BaseModel):
    """Where the Content Service's store and the review queues live (`MODSTREAM_REDIS__URL`,
    `[redis]`): `redis://[:PASSWORD@]HOST:PORT/DB`, `rediss://` for TLS."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # None: the local stack's Redis (127.0.0.1:redis_port, db 0).
    url: SecretStr | None = None

    @model_validator(mode="after")
    def _scheme(self) -> RedisSettings:
        if self.url is not None:
            scheme = urlsplit(self.url.get_secret_value()).scheme
            if scheme not in ("redis", "rediss"):
                raise ValueError(f"url must start with redis:// or rediss://, not {scheme}://")
        return self


class TopicSettings(BaseModel):
    """How `modstream topics create` makes the contract's topics (`[topics]`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    replication_factor: int = Field(default=1, ge=1)
    # None: each topic's own count (modstream/core/topics.py).
    partitions: int | None = Field(default=None, ge=1)


# Every job on the rocksdb backend runs with these RocksDB options. Each checkpoint (1 s) flushes
# the memtables, so the moderation job's input held until the watermark and each version's
# rewritten value reach a new level-0 file every second, and with RocksDB's leveled compaction
# the background threads rewrote the level below again and again: 60 to 70 µs of CPU per event,
# more than decode. Universal compaction rewrites less per byte written, and bloom filters spare
# the lookups of keys that are not there (most lookups of held input and of new versions) a
# read of every level-0 file. Measured with `modstream bench --steady --variants modstream`:
# the compaction threads' CPU per event fell by about 45% (docs/BENCHMARKS.md, stop 45).
ROCKSDB_OPTIONS = {
    "state.backend.rocksdb.compaction.style": "UNIVERSAL",
    "state.backend.rocksdb.use-bloom-filter": "true",
}


class FlinkSettings(BaseModel):
    """How the Flink jobs keep state (`MODSTREAM_FLINK__<NAME>`, `[flink]`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # hashmap: state on the heap, each checkpoint a full copy (fast access, small state);
    # rocksdb: state on local disk, checkpoints incremental (large state, slower access).
    state_backend: Literal["hashmap", "rocksdb"] = "hashmap"
    # None: incremental with rocksdb, full with hashmap.
    incremental_checkpoints: bool | None = None
    # Where `modstream upgrade` and `flink stop --savepointPath` put savepoints (a URI).
    savepoint_dir: str | None = None

    def conf(self) -> dict[str, str]:
        """These settings as Flink configuration (a job's `--flink-conf` still overrides)."""
        incremental = self.incremental_checkpoints
        if incremental is None:
            incremental = self.state_backend == "rocksdb"
        conf = {
            "state.backend.type": self.state_backend,
            "execution.checkpointing.incremental": str(incremental).lower(),
        }
        if self.state_backend == "rocksdb":
            conf.update(ROCKSDB_OPTIONS)
        if self.savepoint_dir:
            conf["execution.checkpointing.savepoint-dir"] = self.savepoint_dir
        return conf


@dataclass(frozen=True)
class Settings:
    """Where things are and how to reach them: the local stack's layout (ports on 127.0.0.1, a
    run directory for data, logs and pids) unless `kafka`/`redis` point elsewhere."""

    project_root: Path
    run_dir: Path
    kafka_port: int = 9092
    controller_port: int = 9093
    redis_port: int = 6379
    # MODSTREAM_MEDIA_ROOT: the only folder the scan job reads `file://` media from; None:
    # RUN_DIR/media, the Content Service's folder (docs/scanning.md).
    media_dir: Path | None = None
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    redis: RedisSettings = field(default_factory=RedisSettings)
    topics: TopicSettings = field(default_factory=TopicSettings)
    flink: FlinkSettings = field(default_factory=FlinkSettings)
    # How commands and jobs log to stderr (modstream/core/logs.py); `--log-format` overrides.
    log_format: LogFormat = "text"
    log_level: LogLevel = "INFO"
    # The TOML file these came from, if any.
    config_file: Path | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """The settings from `env` (default: this process's environment) and its TOML file."""
        env = os.environ if env is None else env
        config_file = _config_file(env)
        if config_file is not None:
            _check_keys(config_file)
        token = _SOURCES.set((env, config_file))
        try:
            loaded = _Loaded()
        except ValidationError as error:
            raise ValueError(_explain(error, config_file)) from None
        finally:
            _SOURCES.reset(token)
        return loaded.settings(config_file)

    def resolved(self) -> dict[str, Any]:
        """What these settings resolve to, secrets included: shown only through
        modstream/core/redaction.py `described`, which masks them (`modstream config show`)."""
        return {
            "config_file": str(self.config_file) if self.config_file else None,
            "project_root": str(self.project_root),
            "run_dir": str(self.run_dir),
            "media_root": str(self.media_root),
            "kafka": {
                **self.kafka.model_dump(mode="json"),
                "bootstrap_servers": self.bootstrap_servers,
                "local": self.local_kafka,
            },
            "redis": {"url": self.redis_url, "local": self.local_redis},
            "topics": self.topics.model_dump(mode="json"),
            "flink": self.flink.model_dump(mode="json"),
            "log_format": self.log_format,
            "log_level": self.log_level,
            "local_ports": {
                "kafka": self.kafka_port,
                "kafka_controller": self.controller_port,
                "redis": self.redis_port,
            },
        }

    @property
    def bootstrap_servers(self) -> str:
        return self.kafka.bootstrap_servers or f"{LOCALHOST}:{self.kafka_port}"

    @property
    def media_root(self) -> Path:
        """Where media references may point (MODSTREAM_MEDIA_ROOT, default RUN_DIR/media)."""
        return self.media_dir or self.run_dir / "media"

    @property
    def redis_url(self) -> str:
        if self.redis.url is not None:
            return self.redis.url.get_secret_value()
        return f"redis://{LOCALHOST}:{self.redis_port}/0"

    @property
    def local_kafka(self) -> bool:
        """Whether Kafka is the local stack's (`modstream up` starts and configures it)."""
        return self.kafka.bootstrap_servers in (None, f"{LOCALHOST}:{self.kafka_port}")

    @property
    def local_redis(self) -> bool:
        """Whether Redis is the local stack's (`modstream up` starts it, with AUTH when the URL
        has a password)."""
        url = urlsplit(self.redis_url)
        return url.hostname in (LOCALHOST, "localhost") and (url.port or 6379) == self.redis_port

    @property
    def jars_dir(self) -> Path:
        return self.project_root / "deploy" / "local" / "jars"

    @property
    def kafka_jars(self) -> Path:
        return self.jars_dir / "kafka"

    @property
    def flink_jars(self) -> list[Path]:
        """The jars every modstream Flink job needs: the Kafka connector and our serializers."""
        return sorted((self.jars_dir / "flink").glob("*.jar"))


def kafka_options(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The kafka-python keyword arguments every client of this process adds to its own:
    security from the settings (empty of anything but the protocol for a plain local broker)."""
    return Settings.from_env(env).kafka.python_options()


# The environment and TOML file `Settings.from_env` is loading from (pydantic-settings builds
# its sources in a classmethod, with no arguments of ours).
_SOURCES: ContextVar[tuple[Mapping[str, str], Path | None]] = ContextVar("modstream_sources")


def _config_file(env: Mapping[str, str]) -> Path | None:
    named = env.get(CONFIG_VARIABLE)
    if named == "none":
        return None
    if named:
        path = Path(named).expanduser().resolve()
        if not path.is_file():
            raise ValueError(f"{CONFIG_VARIABLE}={named}: no such file")
        return path
    root = Path(env.get("MODSTREAM_HOME") or str(PROJECT_ROOT)).resolve()
    default = root / DEFAULT_CONFIG_FILE
    return default if default.is_file() else None


def _check_keys(config_file: Path) -> None:
    """A top-level key the settings do not have is a typo, not something to ignore (the
    tables refuse theirs themselves; the environment may hold any MODSTREAM_ variable)."""
    try:
        keys = set(tomllib.loads(config_file.read_text(encoding="utf-8")))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"{config_file}: {error}") from None
    unknown = sorted(keys - set(_Loaded.model_fields))
    if unknown:
        raise ValueError(
            f"{config_file}: unknown key(s) {', '.join(unknown)}; the keys are in docs/CONFIG.md"
        )


class _MappingEnv(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping instead of os.environ."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str]) -> None:
        self._mapping = env
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(
            self._mapping, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )


class _Loaded(BaseSettings):
    """What the environment and the TOML file say, before defaults that depend on each other."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        env_ignore_empty=True,
        extra="ignore",
    )

    home: Path | None = None
    run_dir: Path | None = None
    kafka_port: int = Field(default=9092, ge=1, le=65535)
    kafka_controller_port: int = Field(default=9093, ge=1, le=65535)
    redis_port: int = Field(default=6379, ge=1, le=65535)
    media_root: Path | None = None
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    redis: RedisSettings = Field(default_factory=RedisSettings)
    topics: TopicSettings = Field(default_factory=TopicSettings)
    flink: FlinkSettings = Field(default_factory=FlinkSettings)
    log_format: LogFormat = "text"
    log_level: LogLevel = "INFO"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        env, config_file = _SOURCES.get()
        sources: list[PydanticBaseSettingsSource] = [_MappingEnv(settings_cls, env)]
        if config_file is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=config_file))
        return tuple(sources)

    @model_validator(mode="after")
    def _ports(self) -> _Loaded:
        ports = {
            "kafka_port": self.kafka_port,
            "kafka_controller_port": self.kafka_controller_port,
            "redis_port": self.redis_port,
        }
        if len(set(ports.values())) != len(ports):
            raise ValueError(
                f"Kafka, controller and Redis ports must differ, got {list(ports.values())}"
            )
        return self

    def settings(self, config_file: Path | None) -> Settings:
        root = (self.home or PROJECT_ROOT).resolve()
        return Settings(
            project_root=root,
            run_dir=(self.run_dir or root / ".run").resolve(),
            kafka_port=self.kafka_port,
            controller_port=self.kafka_controller_port,
            redis_port=self.redis_port,
            media_dir=self.media_root.resolve() if self.media_root else None,
            kafka=self.kafka,
            redis=self.redis,
            topics=self.topics,
            flink=self.flink,
            log_format=self.log_format,
            log_level=self.log_level,
            config_file=config_file,
        )


def _explain(error: ValidationError, config_file: Path | None) -> str:
    """Each problem named by its environment variable (and TOML key, when a file is read)."""
    lines = []
    for problem in error.errors():
        loc = [str(part) for part in problem["loc"]]
        variable = ENV_PREFIX + "__".join(loc).upper() if loc else "the ports"
        where = f" (or `{'.'.join(loc)}` in {config_file})" if config_file and loc else ""
        message = problem["msg"].removeprefix("Value error, ")
        if loc and loc[-1].endswith("_port"):
            message = _port_problem(problem["type"], problem["input"], message)
        lines.append(f"{variable}{where}: {message}")
    return "invalid settings: " + "; ".join(lines)


def _port_problem(kind: str, value: Any, message: str) -> str:
    if kind in ("int_parsing", "int_type"):
        return f"must be a port number, got {value!r}"
    if kind in ("greater_than_equal", "less_than_equal"):
        return f"must be between 1 and 65535, got {value}"
    return message
