"""Secrets masked by value in everything modstream writes out (issue 27, point 10).

Masking by key name missed secrets under other names (`ssl.keystore.key`) and inside other
values (`redis://secret@host`, `redis://host/0?password=…`). So `secret_values` collects the
secret values themselves from the settings and the environment: the SASL password, every Kafka
client property whose name says it holds one (password, key, secret, token, credential, JAAS
line; multi-line key material line by line, since JSON output escapes its newlines), the Redis
URL's password, lone user-info token and credential query parameters, the signing secrets
(MODSTREAM_SIGNING_DEV_SECRET, MODSTREAM_POLICY_KEY, MODSTREAM_KEY_<NAME>, the keys files'
keys) and any other MODSTREAM_ or AWS_ variable whose name says it is a secret. `Redactor`
replaces each of them, wherever it appears, by MASK: `config show`, every log line
(modstream/core/logs.py), DLQ rows (modstream/contract/dlq.py) and metric labels
(modstream/jobs/metrics.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

if TYPE_CHECKING:
    from modstream.core.config import Settings

MASK = "**********"
# Shorter values would mask ordinary words; no credential worth the name is this short.
MIN_SECRET_CHARS = 6
# A setting or variable whose name holds one of these holds a secret value.
SECRET_WORDS = ("password", "passwd", "secret", "jaas", "key", "token", "credential")
# Variables that name files holding secrets, not secrets: their files are read instead.
KEYS_FILE_VARIABLES = ("MODSTREAM_SIGNING_KEYS_FILE", "MODSTREAM_KEYS_FILE")
ENV_PREFIXES = ("MODSTREAM_", "AWS_")


def _secret_name(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in SECRET_WORDS) and not lowered.endswith(
        ("_file", ".location", ".type")
    )


def _pieces(value: str) -> list[str]:
    """A secret and, for multi-line key material, each of its lines."""
    return [value, *(line.strip() for line in value.splitlines())]


def _url_secrets(url: str) -> list[str]:
    parts = urlsplit(url)
    found = []
    if parts.password:
        found.append(parts.password)
    elif parts.username:  # `redis://TOKEN@host`: the user-info is the credential
        found.append(parts.username)
    found += [value for name, value in parse_qsl(parts.query) if _secret_name(name)]
    return found


def _keys_file(path: str) -> list[str]:
    try:
        raw = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(raw, dict):
        return []
    # A person's keys file maps an id to its key; the deployment's (modstream/trust/keyring.py) maps
    # an id to {"role", "key"[, "topics"]}.
    entries = (entry.get("key") if isinstance(entry, dict) else entry for entry in raw.values())
    return [key for key in entries if isinstance(key, str)]


def secret_values(settings: Any, env: Mapping[str, str]) -> frozenset[str]:
    """Every secret value the settings (modstream.core.config.Settings, or None when they do not
    load) and the environment hold."""
    found: list[str] = []
    if settings is not None:
        kafka = settings.kafka
        if kafka.sasl_password is not None:
            found.append(kafka.sasl_password.get_secret_value())
        found += [value for key, value in kafka.properties.items() if _secret_name(key)]
        found += _url_secrets(settings.redis_url)
    for name, value in env.items():
        if name in KEYS_FILE_VARIABLES:
            found += _keys_file(value)
        elif name.startswith(ENV_PREFIXES) and _secret_name(name):
            found.append(value)
        elif name.startswith(ENV_PREFIXES) and name.lower().endswith("url"):
            found += _url_secrets(value)
    pieces = (piece for value in found for piece in _pieces(value))
    return frozenset(piece for piece in pieces if len(piece) >= MIN_SECRET_CHARS)


@dataclass(frozen=True)
class Redactor:
    """Replaces known secret values (longest first) wherever they occur."""

    secrets: tuple[str, ...] = ()

    @classmethod
    def of(cls, values: Iterable[str]) -> Redactor:
        return cls(tuple(sorted(set(values), key=len, reverse=True)))

    def text(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def mapping(self, value: Mapping[str, Any]) -> dict[str, Any]:
        """`value` with every string in it, its keys included, masked."""
        return {self.text(key): self.value(item) for key, item in value.items()}

    def value(self, value: Any) -> Any:
        """`value` with every string in it (dict keys and values, list items) masked."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.value(key): self.value(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(item) for item in value]
        return value


def for_settings(settings: Any, env: Mapping[str, str] | None = None) -> Redactor:
    return Redactor.of(secret_values(settings, os.environ if env is None else env))


def described(settings: Settings) -> dict[str, Any]:
    """What `settings` resolve to, as `modstream config show` prints it: every secret value,
    wherever it appears (a property, a URL), shown as MASK."""
    return for_settings(settings).mapping(settings.resolved())


_CACHE: dict[tuple[tuple[str, str], ...], Redactor] = {}


def current() -> Redactor:
    """The redactor of this process's settings and environment (remade when the variables it
    reads change: tests, and commands that export settings to the jobs they start)."""
    relevant = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)))
    cached = _CACHE.get(relevant)
    if cached is not None:
        return cached
    from modstream.core.config import Settings

    try:
        settings: Any = Settings.from_env()
    except ValueError:  # settings that do not load still have secrets in the environment
        settings = None
    redactor = for_settings(settings)
    _CACHE.clear()
    _CACHE[relevant] = redactor
    return redactor
