"""Where things are and which ports they use, from environment variables with local defaults.

Every setting has one environment variable (documented in README): tests and `make test` use
their own run directory and ports so they never touch a stack a developer started by hand.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
LOCALHOST = "127.0.0.1"


def _port(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name) or str(default)
    try:
        port = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a port number, got {raw!r}") from None
    if not 0 < port < 65536:
        raise ValueError(f"{name} must be between 1 and 65535, got {port}")
    return port


@dataclass(frozen=True)
class Settings:
    """The local stack's layout: ports on 127.0.0.1, a run directory for data, logs and pids."""

    project_root: Path
    run_dir: Path
    kafka_port: int = 9092
    controller_port: int = 9093
    redis_port: int = 6379
    # MODSTREAM_MEDIA_ROOT: the only folder the scan job reads `file://` media from; None:
    # RUN_DIR/media, the Content Service's folder (docs/scanning.md).
    media_dir: Path | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        # An empty variable counts as unset: `MODSTREAM_RUN_DIR= modstream up` must not turn
        # the current directory into a run directory.
        root = Path(env.get("MODSTREAM_HOME") or str(PROJECT_ROOT)).resolve()
        run_dir = Path(env.get("MODSTREAM_RUN_DIR") or str(root / ".run")).resolve()
        settings = cls(
            project_root=root,
            run_dir=run_dir,
            kafka_port=_port(env, "MODSTREAM_KAFKA_PORT", 9092),
            controller_port=_port(env, "MODSTREAM_KAFKA_CONTROLLER_PORT", 9093),
            redis_port=_port(env, "MODSTREAM_REDIS_PORT", 6379),
            media_dir=Path(env["MODSTREAM_MEDIA_ROOT"]).resolve()
            if env.get("MODSTREAM_MEDIA_ROOT")
            else None,
        )
        ports = [settings.kafka_port, settings.controller_port, settings.redis_port]
        if len(set(ports)) != len(ports):
            raise ValueError(f"Kafka, controller and Redis ports must differ, got {ports}")
        return settings

    @property
    def bootstrap_servers(self) -> str:
        return f"{LOCALHOST}:{self.kafka_port}"

    @property
    def media_root(self) -> Path:
        """Where media references may point (MODSTREAM_MEDIA_ROOT, default RUN_DIR/media)."""
        return self.media_dir or self.run_dir / "media"

    @property
    def redis_url(self) -> str:
        return f"redis://{LOCALHOST}:{self.redis_port}/0"

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
