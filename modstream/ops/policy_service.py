"""What `modstream policy` does, apart from its command line (modstream/cli/policy.py): the
keys that sign and check policy records and approvals, reading a policy document, the signed
policy.rules records, and the policy store rebuilt from the topic as the moderation job builds it.

Keys: the deployment key that signs policy records comes from MODSTREAM_POLICY_KEY (UTF-8).
People's own keys (an author's signature, approvals, the activation of `promote --by` or of an
active push with a reason: modstream/trust/two_person.py) come from MODSTREAM_KEY_<NAME> or a JSON
keys file (MODSTREAM_KEYS_FILE, default ~/.config/modstream/keys.json: {"alice": "secret", …}), then
from the deployment's keyring (modstream/trust/signing.py: MODSTREAM_SIGNING_KEYS_FILE, the dev
secret).
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from modstream.contract import SchemaError
from modstream.policy.store import PolicyStore, Rejected, Snapshot, sign
from modstream.trust import signing, two_person
from modstream.trust.signing import Keyring


class PolicyCliError(RuntimeError):
    """A refusal with a message for the author; exit code 1."""


# Keys and approvals.
def policy_key(env: Mapping[str, str] = os.environ) -> bytes:
    key = env.get("MODSTREAM_POLICY_KEY")
    if not key:
        raise PolicyCliError(
            "MODSTREAM_POLICY_KEY is not set: it holds the deployment's policy signing key"
        )
    return key.encode("utf-8")


def people_keys(env: Mapping[str, str] = os.environ) -> dict[str, bytes]:
    """The person's keys file (MODSTREAM_KEYS_FILE), or nothing when there is none."""
    path = signing.person_keys_path(env)
    if not path.exists():
        return {}
    try:
        return signing.read_person_keys(path)
    except ValueError as error:
        raise PolicyCliError(str(error)) from None


@dataclass(frozen=True)
class PeopleKeyring(Keyring):
    """The deployment's keyring plus the person's keys file, whose role-less keys count in the
    people's roles (author, approver): the keys this command checks policy records with. The
    job verifies with the deployment's keyring alone, where each id holds one role."""

    people: Mapping[str, bytes] = field(default_factory=dict)

    def key_for(self, producer: str, role: str) -> bytes | None:
        if role in PEOPLE_ROLES and producer in self.people:
            return self.people[producer]
        return super().key_for(producer, role)


PEOPLE_ROLES = ("author", "approver")


def cli_keyring(env: Mapping[str, str] = os.environ) -> Keyring:
    """The deployment's keyring as the job builds it, plus the person's keys file (as
    authors' and approvers' keys)."""
    try:
        keyring = Keyring.from_env(env)
    except ValueError as error:
        raise PolicyCliError(str(error)) from None
    return PeopleKeyring(
        keyring.keys,
        keyring.required,
        keyring.dev_secret,
        keyring.require_approval,
        None,
        keyring.require_review_access,
        people_keys(env),
    )


def person_key(
    name: str, env: Mapping[str, str] = os.environ, role: str = "approver"
) -> bytes | None:
    """MODSTREAM_KEY_<NAME>, else the keys file, else the deployment keyring's key for name
    in `role` (author or approver)."""
    variable = "MODSTREAM_KEY_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper()
    if env.get(variable):
        return env[variable].encode("utf-8")
    return cli_keyring(env).key_for(name, role)


def own_key(name: str, role: str, what: str, env: Mapping[str, str] = os.environ) -> bytes:
    """`name`'s key in `role`, or a PolicyCliError saying where it is looked for."""
    key = person_key(name, env, role)
    if key is None:
        raise PolicyCliError(
            f"no key for {name!r} to sign {what} (role {role}): MODSTREAM_KEY_<NAME>, the "
            f"keys file MODSTREAM_KEYS_FILE, or the deployment's keyring"
        )
    return key


def authorship(
    document: Mapping[str, Any], author: str, ts: int, env: Mapping[str, str] = os.environ
) -> dict[str, Any]:
    """The author's own signature of `document` (field authorship,
    modstream/trust/two_person.py)."""
    key = own_key(author, "author", "as the author", env)
    return two_person.authorship_record(document, author, key, ts)


def activation(
    document: Mapping[str, Any], fields: Mapping[str, Any], env: Mapping[str, str] = os.environ
) -> dict[str, Any]:
    """The `promotion` field signed by `fields['by']` with their own key: role author where
    they hold one, else approver (the job accepts either)."""
    return two_person.signed_promotion(document, fields, promoter_key(str(fields["by"]), env))


def promoter_key(by: str, env: Mapping[str, str] = os.environ) -> bytes:
    """The key `by` signs an activation with (role author, else approver); a PolicyCliError
    when this machine has neither: `promote --by` is whoever holds the key."""
    return person_key(by, env, "author") or own_key(by, "approver", "the activation", env)


def valid_approvals(
    document: Mapping[str, Any], author: str, directory: Path, env: Mapping[str, str] = os.environ
) -> list[dict[str, Any]]:
    """Approvals in `directory` of exactly this document, by someone other than its author,
    whose signature verifies with the approver's own key (the rule the job applies too)."""
    approvals = []
    pattern = f"{document['policy_id']}-v{document['version']}-*.json"
    for path in sorted(directory.glob(pattern)):
        try:
            approvals.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return signing.valid_approvals(document, author, approvals, lambda name: person_key(name, env))


def require_approval_default(env: Mapping[str, str] = os.environ) -> bool:
    """The deployment's rule (modstream/trust/keyring.py): True unless
    MODSTREAM_INSECURE_NO_APPROVAL=1."""
    try:
        return signing.approval_required(env)
    except ValueError as error:
        raise PolicyCliError(str(error)) from None


def describe(snapshot: Snapshot | None, policy_id: str) -> str:
    if snapshot is None:
        return f"{policy_id}: no version yet"
    parts = [f"active v{snapshot.active}" if snapshot.active else "no active version"]
    if snapshot.shadow:
        parts.append(f"shadow v{snapshot.shadow}")
    if snapshot.canary:
        parts.append(f"canary v{snapshot.canary} at {snapshot.canary_percent:g}%")
    if snapshot.paused:
        parts.append("PUBLICATION PAUSED")
    return f"{policy_id}: " + ", ".join(parts) + f" (since ts {snapshot.ts})"


# Documents and records.
def read_document(path: Path) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise PolicyCliError(f"{path}: cannot read YAML: {error}") from None
    if not isinstance(document, dict):
        raise PolicyCliError(f"{path}: a policy document must be a mapping")
    return document


def checked_document(path: Path) -> dict[str, Any]:
    """A policy file read and validated; its problems, one a line, in the error."""
    from modstream.policy.evaluate import PolicyError, load_policy

    document = read_document(path)
    try:
        load_policy(document)
    except PolicyError as error:
        raise PolicyCliError(f"{path} is not valid:\n  " + "\n  ".join(error.problems)) from None
    return document


def now_ms() -> int:
    return int(time.time() * 1000)


def version_record(
    document: dict[str, Any],
    *,
    mode: str,
    author: str,
    ts: int,
    parent_version: int | None,
    key: bytes,
    percent: float | None = None,
    approvals: list[dict[str, Any]] | None = None,
    event_id: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A signed policy.rules version; `extra` fields (a promotion's gate result) are signed
    with it (the contract lets records carry fields it does not name)."""
    record: dict[str, Any] = {
        "event_id": event_id
        or f"{document['policy_id']}-v{document['version']}-{uuid.uuid4().hex[:12]}",
        "policy_id": document["policy_id"],
        "version": document["version"],
        "parent_version": parent_version,
        "mode": mode,
        "author": author,
        "ts": ts,
        "document": document,
    }
    if mode == "canary":
        record["canary_percent"] = percent
    if approvals:
        record["approvals"] = approvals
    record.update(extra or {})
    record["signature"] = sign(record, key)
    return record


def control_record(
    policy_id: str,
    command: str,
    *,
    ts: int,
    key: bytes,
    version: int | None = None,
    event_id: str | None = None,
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "event_id": event_id or f"{policy_id}-{command}-{uuid.uuid4().hex[:12]}",
        "policy_id": policy_id,
        "command": command,
        "ts": ts,
    }
    if version is not None:
        record["version"] = version
    record["signature"] = sign(record, key)
    return record


def load_store(
    bootstrap: str, topic: str, key: bytes, keyring: Keyring | None = None
) -> tuple[PolicyStore, list[str]]:
    """Rebuild the store from the topic as the moderation job would (approvals checked with
    `keyring`, default `cli_keyring()`); list what it rejected."""
    from modstream.core import kafkaio

    store = PolicyStore(cli_keyring() if keyring is None else keyring)
    rejected = []
    for message in kafkaio.read_to_end(bootstrap, topic):
        try:
            store.apply(message.value, key)
        except (Rejected, SchemaError) as error:
            rejected.append(f"offset {message.offset}: {error}")
    return store, rejected


def publish(
    bootstrap: str,
    topic: str,
    document: dict[str, Any],
    *,
    mode: str,
    author: str,
    ts: int,
    approvals_dir: Path,
    require_approval: bool = True,
    percent: float | None = None,
    activation_fields: Mapping[str, Any] | None = None,
    signed_authorship: Mapping[str, Any] | None = None,
    promoting: bool = False,
) -> tuple[dict[str, Any], PolicyStore]:
    """Check, sign and produce one policy version: the one path of every push and every
    activation (`policy push`, `policy promote`). The version must be new (or, `promoting`, a
    shadow or canary candidate on the topic) and greater than the active one; it carries its
    author's own signature (`signed_authorship`, a promoted candidate's, or made here with the
    author's key); an active one needs an approval in `approvals_dir` by someone other than
    `author` and `activation_fields` (by, from_mode, reason...), signed here with the key of
    its `by`; the record must pass the moderation job's own rules (PolicyStore.apply). Returns
    the record and the store re-read from the topic after it."""
    from modstream.core import kafkaio

    key = policy_key()
    store, _ = load_store(bootstrap, topic, key)
    policy_id, version = document["policy_id"], document["version"]
    current = store.snapshot(policy_id)
    _check_new(store, document, topic, promoting)
    approvals = valid_approvals(document, author, approvals_dir)
    if mode == "active" and require_approval and not approvals:
        raise PolicyCliError(
            f"{policy_id} v{version} has no approval from someone other than its author "
            f"{author!r}: run `modstream policy approve {version} --approver NAME` "
            f"(as that person) first"
        )
    extra = _people_fields(document, mode, author, ts, activation_fields, signed_authorship)
    record = version_record(
        document,
        mode=mode,
        author=author,
        ts=ts,
        parent_version=current.active if current else None,
        key=key,
        percent=percent,
        approvals=approvals,
        extra=extra,
    )
    # The job's own rules (PolicyStore.apply, approvals included): never push what it refuses.
    try:
        store.apply(record, key)
    except Rejected as error:
        raise PolicyCliError(
            f"the moderation job would refuse {policy_id} v{version} ({error.error_class}): {error}"
        ) from None
    payload = json.dumps(record, ensure_ascii=False).encode("utf-8")
    kafkaio.produce(bootstrap, topic, [(policy_id, payload)])
    after, _ = load_store(bootstrap, topic, key)
    return record, after


def _people_fields(
    document: Mapping[str, Any],
    mode: str,
    author: str,
    ts: int,
    activation_fields: Mapping[str, Any] | None,
    signed_authorship: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The people's signatures a version carries: its author's, and an active one's activation
    (modstream/trust/two_person.py)."""
    extra: dict[str, Any] = {
        two_person.AUTHORSHIP_FIELD: dict(signed_authorship or authorship(document, author, ts))
    }
    if mode == "active":
        if activation_fields is None:
            name = f"{document['policy_id']} v{document['version']}"
            raise PolicyCliError(f"{name}: an active version needs its activation")
        extra[two_person.PROMOTION_FIELD] = activation(document, activation_fields)
    return extra


def _check_new(
    store: PolicyStore, document: Mapping[str, Any], topic: str, promoting: bool
) -> None:
    """A version number never pushed (unless promoting), greater than the active one."""
    policy_id, version = document["policy_id"], document["version"]
    current = store.snapshot(policy_id)
    if store.version(policy_id, version) is not None and not promoting:
        raise PolicyCliError(f"{policy_id} v{version} is already on {topic}; bump version")
    if current and current.active is not None and version <= current.active:
        raise PolicyCliError(
            f"{policy_id} v{version} is not greater than the active v{current.active}"
        )
