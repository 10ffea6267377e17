"""The keys a deployment trusts, each bound to a role and to the topics it may sign (issue 27).

An id's key says who it is *and* what it may say: a detector's key signs evidence, never a
review; a reviewer's key signs reviews, never a bank entry. The deployment's keys file
(MODSTREAM_SIGNING_KEYS_FILE) gives each id `{"role": ..., "key": ...}` and, optionally,
`"topics"`: a subset of its role's topics. For local stacks a dev secret
(MODSTREAM_SIGNING_DEV_SECRET) derives a key per (role, id), so a derived key is bound to its
role too; the secret is refused by a job whose brokers are not local (`refuse_dev_secret`).

Secure by default: every authority topic requires signatures and an active policy version an
approval; only explicitly named insecure settings (MODSTREAM_INSECURE_*) lower that, and a job
logs them at start (`Keyring.insecure_settings`). docs/RELIABILITY.md, "Signed authority inputs".

Pure: no PyFlink, no clock; the environment and the keys file are read by `from_env` (and by
unpickling a keyring that came from a file, so a job graph never carries the file's keys).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

KEYS_FILE_VARIABLE = "MODSTREAM_SIGNING_KEYS_FILE"
DEV_SECRET_VARIABLE = "MODSTREAM_SIGNING_DEV_SECRET"
# Retired switches: accepted only where they ask for what is now the default.
REQUIRED_VARIABLE = "MODSTREAM_SIGNATURES_REQUIRED"
APPROVAL_VARIABLE = "MODSTREAM_REQUIRE_APPROVAL"
# The only ways to lower the defaults; a job logs them at start.
INSECURE_UNSIGNED_VARIABLE = "MODSTREAM_INSECURE_UNSIGNED_TOPICS"
INSECURE_NO_APPROVAL_VARIABLE = "MODSTREAM_INSECURE_NO_APPROVAL"
INSECURE_UNGRANTED_VARIABLE = "MODSTREAM_INSECURE_UNGRANTED_REVIEWS"
# A person's own keys (reviewers, policy approvers): the file on their machine.
PERSON_KEYS_VARIABLE = "MODSTREAM_KEYS_FILE"

# Policy approvals travel inside policy.rules records; an approver's key signs them.
POLICY_TOPIC = "policy.rules"
ROLE_TOPICS: dict[str, frozenset[str]] = {
    "detector": frozenset({"detector.results"}),
    # A reviewer signs their decisions and their claims of tasks (modstream/contract/review.py).
    "reviewer": frozenset({"review.decisions", "review.leases"}),
    # A lead grants reviewers their queues (review.grants).
    "lead": frozenset({"review.grants"}),
    "bank": frozenset({"hash.bank"}),
    "appeals": frozenset({"moderation.appeals"}),
    "approver": frozenset({POLICY_TOPIC}),
    # Authors sign their own policy versions (field authorship, modstream/trust/two_person.py).
    "author": frozenset({POLICY_TOPIC}),
}
# The role whose keys sign each authority topic's records.
TOPIC_ROLES: dict[str, str] = {
    "detector.results": "detector",
    "review.decisions": "reviewer",
    "hash.bank": "bank",
    "moderation.appeals": "appeals",
    "review.grants": "lead",
    "review.leases": "reviewer",
}
AUTHORITY_TOPIC_NAMES = frozenset(TOPIC_ROLES)
TRUE = ("1", "true", "yes")
FALSE = ("0", "false", "no")


@functools.lru_cache(maxsize=4096)  # a few producers sign nearly every record; bounded
def derive_key(secret: bytes, producer: str, role: str) -> bytes:
    """The key of `producer` in `role` under a dev secret: the hex HMAC-SHA256 of
    `<role>:<id>`, as ASCII bytes (writable in a person's keys file as it is). One id gets
    another key in each role, so a detector's derived key signs no review. Cached: admitting
    a signed record derived its producer's key each time (an HMAC of its own)."""
    message = f"{role}:{producer}".encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest().encode("ascii")


@dataclass(frozen=True)
class SigningKey:
    """One id's key, its role, and the topics it may sign (a subset of the role's)."""

    key: bytes
    role: str
    topics: frozenset[str]

    @classmethod
    def of(cls, key: bytes, role: str) -> SigningKey:
        return cls(key, role, ROLE_TOPICS[role])


@dataclass(frozen=True)
class Keyring:
    """The keys a deployment trusts and the topics whose records must be signed.

    Picklable (a job ships it in its config), but a keyring read from a keys file pickles as
    the file's path and re-reads it where it is unpickled (the TaskManager's mounted file), so
    the keys stay out of the job graph. `keys` wins over the dev secret for an id it names."""

    keys: Mapping[str, SigningKey] = field(default_factory=dict)
    required: frozenset[str] = AUTHORITY_TOPIC_NAMES
    dev_secret: bytes | None = None
    require_approval: bool = True
    keys_file: str | None = None
    # Reviews apply only under a grant and a lease the job holds as records (review_access).
    require_review_access: bool = True

    def key_for(self, producer: str, role: str) -> bytes | None:
        """`producer`'s key if it holds `role`; None otherwise."""
        entry = self.keys.get(producer)
        if entry is not None:
            return entry.key if entry.role == role else None
        if self.dev_secret is not None and producer:
            return derive_key(self.dev_secret, producer, role)
        return None

    def refusal(self, producer: str, topic: str) -> str | None:
        """Why `producer` may not sign `topic` in this deployment (no key, another role, a
        topic outside its grant), or None when it may; the message names no key."""
        entry = self.keys.get(producer)
        if entry is None:
            return None if self.dev_secret is not None else "has no key in this deployment"
        if entry.role != TOPIC_ROLES.get(topic, entry.role) or topic not in entry.topics:
            return f"holds a key of role {entry.role}, which may not sign {topic}"
        return None

    def requires(self, topic: str) -> bool:
        return topic in self.required

    def with_keys(self, extra: Mapping[str, SigningKey]) -> Keyring:
        """This keyring plus `extra` (its own keys win); pickled with its keys."""
        return replace(self, keys={**extra, **self.keys}, keys_file=None)

    def insecure_settings(self) -> list[str]:
        """What this keyring lowers below the defaults, one line each, for the job's log."""
        lines = []
        unsigned = sorted(AUTHORITY_TOPIC_NAMES - self.required)
        if unsigned:
            lines.append(
                f"{INSECURE_UNSIGNED_VARIABLE}: unsigned records are accepted on "
                f"{', '.join(unsigned)}"
            )
        if not self.require_approval:
            lines.append(
                f"{INSECURE_NO_APPROVAL_VARIABLE}: an active policy version needs no approval"
            )
        if not self.require_review_access:
            lines.append(
                f"{INSECURE_UNGRANTED_VARIABLE}: a review applies without a grant or lease"
            )
        if self.dev_secret is not None:
            lines.append(
                f"{DEV_SECRET_VARIABLE}: keys derived from a dev secret (local stacks only)"
            )
        return lines

    def __reduce__(self) -> tuple[Any, ...]:
        keys = {} if self.keys_file is not None else dict(self.keys)
        return (
            _unpickled,
            (
                keys,
                self.required,
                self.dev_secret,
                self.require_approval,
                self.keys_file,
                self.require_review_access,
            ),
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Keyring:
        """MODSTREAM_SIGNING_KEYS_FILE, MODSTREAM_SIGNING_DEV_SECRET, and the insecure
        settings MODSTREAM_INSECURE_UNSIGNED_TOPICS (comma-separated authority topics, or
        `all`) and MODSTREAM_INSECURE_NO_APPROVAL (1). A malformed setting, or a retired
        switch set to lower a default, raises ValueError naming its variable."""
        env = os.environ if env is None else env
        keys_file = env.get(KEYS_FILE_VARIABLE) or None
        secret = env.get(DEV_SECRET_VARIABLE)
        return cls(
            keys=read_keys_file(Path(keys_file)) if keys_file else {},
            required=required_topics(env),
            dev_secret=secret.encode("utf-8") if secret else None,
            require_approval=approval_required(env),
            keys_file=keys_file,
            require_review_access=not insecure_switch(env, INSECURE_UNGRANTED_VARIABLE),
        )


def _unpickled(
    keys: Mapping[str, SigningKey],
    required: frozenset[str],
    dev_secret: bytes | None,
    require_approval: bool,
    keys_file: str | None,
    require_review_access: bool = True,
) -> Keyring:
    if keys_file is not None:
        keys = read_keys_file(Path(keys_file))
    return Keyring(keys, required, dev_secret, require_approval, keys_file, require_review_access)


def read_keys_file(path: Path) -> dict[str, SigningKey]:
    """The deployment's keys: a JSON object `{id: {"role": r, "key": k[, "topics": [...]]}}`.
    Anything else (an id without a role, an unknown role, a topic outside the role's) is a
    ValueError naming MODSTREAM_SIGNING_KEYS_FILE and the id, never a key."""
    raw = _json_object(path, KEYS_FILE_VARIABLE)
    return {name: _entry(path, name, value) for name, value in raw.items()}


def _entry(path: Path, name: str, value: object) -> SigningKey:
    where = f"{KEYS_FILE_VARIABLE}: {path}: id {name!r}"
    if not name or not isinstance(value, dict):
        raise ValueError(f'{where} must be an object {{"role": ..., "key": ...}}')
    role, key = value.get("role"), value.get("key")
    if role not in ROLE_TOPICS:
        raise ValueError(f"{where} has role {role!r}; roles: {', '.join(sorted(ROLE_TOPICS))}")
    if not isinstance(key, str) or not key:
        raise ValueError(f"{where} has no key (a non-empty string)")
    topics = value.get("topics", sorted(ROLE_TOPICS[role]))
    if not isinstance(topics, list) or not set(topics) <= ROLE_TOPICS[role] or not topics:
        raise ValueError(
            f"{where}: topics must be a non-empty subset of {sorted(ROLE_TOPICS[role])}"
        )
    return SigningKey(key.encode("utf-8"), role, frozenset(topics))


def read_person_keys(path: Path) -> dict[str, bytes]:
    """A person's own keys file: a JSON object `{id: key}` with string keys (a reviewer's
    holds one entry); anything else is a ValueError naming MODSTREAM_KEYS_FILE."""
    raw = _json_object(path, PERSON_KEYS_VARIABLE)
    if not all(isinstance(key, str) and key and name for name, key in raw.items()):
        raise ValueError(f"{PERSON_KEYS_VARIABLE}: {path} must be a JSON object of id -> key")
    return {name: key.encode("utf-8") for name, key in raw.items()}


def _json_object(path: Path, variable: str) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"{variable}: cannot read {path}: {error}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{variable}: {path} must be a JSON object")
    return raw


def person_keys_path(env: Mapping[str, str]) -> Path:
    """The person's keys file: MODSTREAM_KEYS_FILE, default ~/.config/modstream/keys.json."""
    return Path(env.get(PERSON_KEYS_VARIABLE) or Path.home() / ".config/modstream/keys.json")


# The defaults and the insecure settings that lower them.
def required_topics(env: Mapping[str, str]) -> frozenset[str]:
    """Every authority topic, less those MODSTREAM_INSECURE_UNSIGNED_TOPICS names."""
    retired = (env.get(REQUIRED_VARIABLE) or "all").strip().lower()
    if retired != "all":
        raise ValueError(
            f"{REQUIRED_VARIABLE}={retired}: every authority topic requires signatures; "
            f"name the topics that may go unsigned in {INSECURE_UNSIGNED_VARIABLE}"
        )
    return AUTHORITY_TOPIC_NAMES - parse_topics(env.get(INSECURE_UNSIGNED_VARIABLE) or "")


def parse_topics(setting: str) -> frozenset[str]:
    """`all`, or comma-separated authority topics; an unknown topic is a ValueError."""
    names = {name.strip() for name in setting.split(",") if name.strip()}
    if "all" in names:
        return AUTHORITY_TOPIC_NAMES
    unknown = sorted(names - AUTHORITY_TOPIC_NAMES)
    if unknown:
        raise ValueError(
            f"{INSECURE_UNSIGNED_VARIABLE}: {', '.join(unknown)} carry no signature; "
            f"choose from {', '.join(sorted(AUTHORITY_TOPIC_NAMES))} or all"
        )
    return frozenset(names)


def approval_required(env: Mapping[str, str]) -> bool:
    """True unless MODSTREAM_INSECURE_NO_APPROVAL=1."""
    retired = (env.get(APPROVAL_VARIABLE) or "1").strip().lower()
    if retired in FALSE:
        raise ValueError(
            f"{APPROVAL_VARIABLE}={retired}: active versions require an approval; "
            f"{INSECURE_NO_APPROVAL_VARIABLE}=1 turns that off"
        )
    return not insecure_switch(env, INSECURE_NO_APPROVAL_VARIABLE)


def insecure_switch(env: Mapping[str, str], variable: str) -> bool:
    """Whether the insecure setting `variable` is on (1); a value other than 1 or 0 is a
    ValueError naming it."""
    insecure = (env.get(variable) or "0").strip().lower()
    if insecure not in TRUE + FALSE:
        raise ValueError(f"{variable}={insecure}: 1 or 0")
    return insecure in TRUE


# Where a dev secret may be used: a local stack.
LOCAL_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT")  # what `modstream up` runs


def refuse_dev_secret(keyring: Keyring, bootstrap_servers: str, security_protocol: str) -> None:
    """ValueError when `keyring` derives keys from a dev secret but the brokers are not a
    local stack's: every bootstrap host on loopback, without TLS (`modstream up` runs
    PLAINTEXT or SASL_PLAINTEXT on 127.0.0.1; TLS on loopback is a tunnel to a real cluster)."""
    if keyring.dev_secret is None:
        return
    hosts = [_host(server) for server in bootstrap_servers.split(",") if server.strip()]
    remote = sorted({host for host in hosts if not _loopback(host)})
    protocol = security_protocol.upper()
    if remote or not hosts or protocol not in LOCAL_PROTOCOLS:
        where = f"brokers on {', '.join(remote)}" if remote else f"security.protocol {protocol}"
        raise ValueError(
            f"{DEV_SECRET_VARIABLE} is for local stacks only (brokers on loopback, "
            f"{' or '.join(LOCAL_PROTOCOLS)}); this deployment has {where}: give every "
            f"producer its own key in {KEYS_FILE_VARIABLE} and unset {DEV_SECRET_VARIABLE}"
        )


def _host(server: str) -> str:
    server = server.strip()
    if server.startswith("["):  # [::1]:9092
        return server[1:].split("]", 1)[0]
    return server.rsplit(":", 1)[0] if server.count(":") == 1 else server


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
