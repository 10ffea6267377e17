"""Sessions, CSRF tokens and the rate limit, without a browser or a server."""

from __future__ import annotations

import pytest

from modstream.console.sessions import RateLimiter, Session, SessionCodec

SECRET = b"console-test-secret-0123456789"


def test_a_session_survives_its_cookie_and_a_forged_one_does_not() -> None:
    codec = SessionCodec(SECRET)
    session = Session.anonymous().logged_in("carol")
    cookie = codec.dump(session)
    assert codec.load(cookie) == session
    assert codec.load(cookie[:-2] + "xx") is None
    assert SessionCodec(b"another-secret-0123456789").load(cookie) is None
    assert codec.load(None) is None and codec.load("garbage") is None


def test_an_expired_session_is_gone() -> None:
    codec = SessionCodec(SECRET, max_age_s=-1)
    assert codec.load(codec.dump(Session.anonymous().logged_in("carol"))) is None


def test_login_changes_the_session_id() -> None:
    before = Session.anonymous()
    after = before.logged_in("carol")
    assert after.sid != before.sid and after.reviewer_id == "carol"


def test_the_csrf_token_is_the_sessions_own() -> None:
    codec = SessionCodec(SECRET)
    mine, theirs = Session.anonymous(), Session.anonymous()
    token = codec.csrf_token(mine)
    assert codec.csrf_valid(mine, token)
    assert not codec.csrf_valid(theirs, token)
    assert not codec.csrf_valid(mine, None) and not codec.csrf_valid(mine, "")


def test_a_short_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 16 bytes"):
        SessionCodec(b"short")


def test_the_rate_limit_allows_a_burst_then_the_rate() -> None:
    limiter = RateLimiter(per_second=2.0, burst=3.0)
    assert [limiter.allow("carol", 0.0) for _ in range(4)] == [True, True, True, False]
    assert limiter.allow("bob", 0.0)  # per reviewer
    assert limiter.allow("carol", 0.5) and not limiter.allow("carol", 0.5)
    assert [limiter.allow("carol", 10.0) for _ in range(4)] == [True, True, True, False]
