"""Reviewer accounts of the console: a JSON file of ids and scrypt password hashes.

hashlib.scrypt (the standard library's memory-hard KDF, RFC 7914) at N=2**15, r=8, p=1: the
work factor OWASP lists for scrypt, 32 MiB per check, so a stolen accounts file costs an
attacker that much per guess. The file holds no signing key: the console signs a reviewer's
records with the deployment's key of that reviewer (modstream/trust/keyring.py), so the file alone
lets nobody decide. `modstream review add-reviewer ID` writes an entry (docs/REVIEW.md).

Leads are marked here too (`"leads": [ID, ...]`, `add-reviewer ID --lead`): the lead view shows
every queue and the access log with the reviewers' private notes, so who is a lead is the
deployment's word, like who has an account. Not the keyring: its dev secret derives a `lead` key
for any id. A lead signs grants with their own key, apart from this (`modstream review grant`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEME = "scrypt"
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**15, 8, 1
_MAXMEM = 64 * 1024 * 1024
_SALT_BYTES, _HASH_BYTES = 16, 32
MIN_PASSWORD_CHARS = 12
ACCOUNTS_VARIABLE = "MODSTREAM_CONSOLE_ACCOUNTS"


class AccountError(ValueError):
    """An account file or password that cannot be used; the message never holds a password."""


def hash_password(password: str, salt: bytes | None = None) -> str:
    """`scrypt$N$r$p$<salt hex>$<hash hex>`: everything a later check needs, the cost included
    (so raising the cost later leaves old hashes checkable)."""
    salt = secrets.token_bytes(_SALT_BYTES) if salt is None else salt
    digest = _scrypt(password, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
    return f"{SCHEME}${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${salt.hex()}${digest.hex()}"


def check_password(password: str, stored: str) -> bool:
    """Whether `password` matches `stored` (constant-time compare); False for a malformed hash."""
    try:
        scheme, n, r, p, salt, expected = stored.split("$")
        if scheme != SCHEME:
            return False
        digest = _scrypt(password, bytes.fromhex(salt), int(n), int(r), int(p))
    except (ValueError, MemoryError):
        return False
    return hmac.compare_digest(digest, bytes.fromhex(expected))


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=n, r=r, p=p, maxmem=_MAXMEM, dklen=_HASH_BYTES
    )


# Checked for an unknown id, so a wrong id costs what a wrong password costs (no enumeration).
_DUMMY_HASH = hash_password("modstream-console-no-such-reviewer", salt=b"\x00" * _SALT_BYTES)


@dataclass(frozen=True)
class Accounts:
    """reviewer id -> password hash, and the ids that are leads, as the accounts file holds
    them (a lead with an identity header from a proxy needs no password entry)."""

    hashes: dict[str, str]
    leads: frozenset[str] = frozenset()

    @classmethod
    def load(cls, path: Path) -> Accounts:
        if not path.exists():
            return cls({})
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            reviewers = raw["reviewers"]
            hashes = {str(rid): str(entry["password"]) for rid, entry in reviewers.items()}
            leads = raw.get("leads") or []
            if not isinstance(leads, list):
                raise TypeError("leads")
        except (ValueError, KeyError, TypeError, AttributeError):
            raise AccountError(
                f'{path}: not an accounts file ({{"reviewers": {{ID: {{"password": HASH}}}}, '
                '"leads": [ID, ...]})'
            ) from None
        return cls(hashes, frozenset(str(lead) for lead in leads))

    def authenticate(self, reviewer_id: str, password: str) -> bool:
        """Whether the id exists and the password is its own."""
        stored = self.hashes.get(reviewer_id)
        matched = check_password(password, stored or _DUMMY_HASH)
        return stored is not None and matched

    def with_reviewer(self, reviewer_id: str, password: str) -> Accounts:
        """These accounts with `reviewer_id`'s password set (added or replaced)."""
        if not reviewer_id or len(reviewer_id) > 256:
            raise AccountError("a reviewer id is 1 to 256 characters")
        if len(password) < MIN_PASSWORD_CHARS:
            raise AccountError(f"a password is at least {MIN_PASSWORD_CHARS} characters")
        return Accounts({**self.hashes, reviewer_id: hash_password(password)}, self.leads)

    def with_lead(self, reviewer_id: str) -> Accounts:
        """These accounts with `reviewer_id` marked a lead (the lead view)."""
        return Accounts(self.hashes, self.leads | {reviewer_id})

    def save(self, path: Path) -> None:
        """Written whole to a temporary file and renamed, readable by its owner only."""
        body: dict[str, Any] = {
            "reviewers": {rid: {"password": h} for rid, h in sorted(self.hashes.items())},
            "leads": sorted(self.leads),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            json.dump(body, out, indent=2)
            out.write("\n")
        os.replace(temporary, path)
