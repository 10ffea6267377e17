"""`modstream review`: the reviewer is whoever's key is in their keys file, and decisions are
signed with it (no broker; the queue itself is tested on real Redis in tests/integration)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modstream.cli.main import build_parser
from modstream.review.queue import Reviewer, ReviewError
from modstream.testing.records import T0
from modstream.trust.signing import Keyring, check, derive_key

SECRET = b"review-dev-secret"
DEPLOYMENT = Keyring(dev_secret=SECRET, required=frozenset({"review.decisions"}))


def keys_file(tmp_path: Path, content: object) -> dict[str, str]:
    path = tmp_path / "keys.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return {"MODSTREAM_KEYS_FILE": str(path)}


def decision(reviewer_id: str) -> dict[str, object]:
    return {
        "event_id": "rv-1",
        "task_id": "t-1",
        "content_id": "c-1",
        "content_version": 1,
        "reviewer_id": reviewer_id,
        "outcome": "BLOCK",
        "reason": "spam",
        "ts": T0,
    }


def test_the_reviewer_is_the_one_person_in_the_keys_file(tmp_path: Path) -> None:
    alice_key = derive_key(SECRET, "alice", "reviewer").decode()
    reviewer = Reviewer.from_env(keys_file(tmp_path, {"alice": alice_key}))
    assert (reviewer.reviewer_id, reviewer.key) == ("alice", alice_key.encode())
    record = reviewer.sign(decision("alice"))
    assert check("review.decisions", record, DEPLOYMENT) is None


def test_a_decision_naming_another_reviewer_signed_with_my_key_is_rejected(
    tmp_path: Path,
) -> None:
    me = Reviewer.from_env(
        keys_file(tmp_path, {"alice": derive_key(SECRET, "alice", "reviewer").decode()})
    )
    as_bob = me.sign(decision("bob"))
    message = check("review.decisions", as_bob, DEPLOYMENT)
    assert message is not None and "does not verify" in message


def test_a_key_the_deployment_does_not_know_for_me_is_rejected(tmp_path: Path) -> None:
    me = Reviewer.from_env(keys_file(tmp_path, {"alice": "a key I made up"}))
    assert check("review.decisions", me.sign(decision("alice")), DEPLOYMENT) is not None


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ({"alice": "a", "bob": "b"}, "holds 2 keys; a reviewer's keys file holds exactly one"),
        ({}, "holds 0 keys"),
        ("not json", "MODSTREAM_KEYS_FILE: cannot read"),
        ({"alice": 7}, "must be a JSON object of id -> key"),
    ],
)
def test_no_single_identity_no_review(tmp_path: Path, content: object, expected: str) -> None:
    with pytest.raises(ReviewError, match=expected):
        Reviewer.from_env(keys_file(tmp_path, content))


def test_a_missing_keys_file_is_a_clear_refusal(tmp_path: Path) -> None:
    with pytest.raises(ReviewError, match=r"no reviewer key: .* does not exist"):
        Reviewer.from_env({"MODSTREAM_KEYS_FILE": str(tmp_path / "absent.json")})


def test_the_command_has_no_reviewer_flag() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["review", "decide", "t-1", "--reviewer", "bob"])
