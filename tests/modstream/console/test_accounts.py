"""Reviewer accounts: scrypt hashes that check the right password only, a file readable by its
owner only, and no way to tell an unknown id from a wrong password."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from modstream.console.accounts import AccountError, Accounts, check_password, hash_password


def test_a_hash_checks_its_password_and_no_other() -> None:
    stored = hash_password("correct horse battery")
    assert stored.startswith("scrypt$32768$8$1$")
    assert check_password("correct horse battery", stored)
    assert not check_password("correct horse batterY", stored)
    assert hash_password("correct horse battery") != stored  # a fresh salt each time


@pytest.mark.parametrize("stored", ["", "scrypt$1$2", "bcrypt$1$1$1$00$00", "scrypt$x$8$1$00$00"])
def test_a_malformed_hash_checks_nothing(stored: str) -> None:
    assert not check_password("anything at all", stored)


def test_accounts_round_trip_through_an_owner_only_file(tmp_path: Path) -> None:
    path = tmp_path / "console" / "accounts.json"
    Accounts.load(path).with_reviewer("carol", "a long passphrase").save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    accounts = Accounts.load(path)
    assert accounts.authenticate("carol", "a long passphrase")
    assert not accounts.authenticate("carol", "a wrong passphrase")
    assert not accounts.authenticate("mallory", "a long passphrase")
    assert "a long passphrase" not in path.read_text()


def test_a_short_password_or_an_empty_id_is_refused() -> None:
    with pytest.raises(AccountError, match="at least 12"):
        Accounts({}).with_reviewer("carol", "short")
    with pytest.raises(AccountError, match="1 to 256"):
        Accounts({}).with_reviewer("", "a long passphrase")


def test_a_file_that_is_not_an_accounts_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "accounts.json"
    path.write_text('{"reviewers": ["carol"]}')
    with pytest.raises(AccountError, match="not an accounts file"):
        Accounts.load(path)


def test_leads_are_marked_in_the_accounts_file_and_survive_a_password_change(
    tmp_path: Path,
) -> None:
    path = tmp_path / "accounts.json"
    Accounts.load(path).with_reviewer("lena", "a long passphrase").with_lead("lena").save(path)
    Accounts.load(path).with_reviewer("lena", "another passphrase").save(path)
    assert Accounts.load(path).leads == frozenset({"lena"})
    proxied = tmp_path / "proxied.json"  # behind an identity proxy: leads, no passwords
    proxied.write_text('{"reviewers": {}, "leads": ["lena"]}')
    assert Accounts.load(proxied).leads == frozenset({"lena"})
    proxied.write_text('{"reviewers": {}, "leads": "lena"}')
    with pytest.raises(AccountError, match="not an accounts file"):
        Accounts.load(proxied)
