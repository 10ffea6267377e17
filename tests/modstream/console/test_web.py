"""The web layer over a fake `Console` (the real one is tests/integration/test_console.py):
login with its CSRF token, POSTs without the session's token refused, a refusal is a 403,
pages carry the security headers, the session cookie is HttpOnly and SameSite=Strict, the
identity header is believed from a trusted proxy only."""

from __future__ import annotations

import pytest

from modstream.testing.console import FakeConsole, client, csrf, logged_in


@pytest.fixture
def console() -> FakeConsole:
    return FakeConsole()


def test_login_then_claim_view_and_decide(console: FakeConsole) -> None:
    with client(console) as browser:
        assert browser.get("/").headers["location"] == "/login"
        token = logged_in(browser, "carol", "carol-passphrase")
        claimed = browser.post("/queues/adult/claim", data={"csrf": token})
        assert claimed.headers["location"] == "/tasks/review-1"
        page = browser.get("/tasks/review-1")
        assert page.status_code == 200
        assert 'class="evidence-image blurred"' in page.text
        assert "Text read and speech heard" not in page.text  # nothing read, nothing said
        assert page.headers["content-security-policy"].startswith("default-src 'self'")
        assert page.headers["cache-control"] == "no-store"
        cookie = page.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        form = {"csrf": token, "outcome": "BLOCK", "reason": "sexual_content", "note": "n"}
        done = browser.post("/tasks/review-1/decide", data=form)
        assert done.status_code == 303
        assert console.decided == [("carol", "review-1", "BLOCK", "sexual_content", "n")]
        assert [action for _, action, _ in console.log] == ["login"]


def test_a_post_without_the_sessions_csrf_token_is_refused(console: FakeConsole) -> None:
    with client(console) as browser:
        logged_in(browser, "carol", "carol-passphrase")
        for token in ("", "0" * 64):
            response = browser.post("/queues/adult/claim", data={"csrf": token})
            assert response.status_code == 403
        reveal = browser.post("/tasks/review-1/reveal/0", headers={"X-CSRF-Token": "bad"})
        assert reveal.status_code == 403
    assert [extra.get("detail") for _, a, extra in console.log if a == "refused"] == ["csrf"] * 3


def test_a_forged_claim_by_an_ungranted_reviewer_is_refused(console: FakeConsole) -> None:
    with client(console) as browser:
        token = logged_in(browser, "dave", "dave-passphrase-1")
        assert "No task waits" in browser.get("/").text
        response = browser.post("/queues/adult/claim", data={"csrf": token})
        assert response.status_code == 403
        assert "no grant of queue 'adult'" in response.json()["error"]
        assert browser.get("/tasks/review-1").status_code == 403


def test_a_wrong_password_is_refused_and_logged(console: FakeConsole) -> None:
    with client(console) as browser:
        token = csrf(browser.get("/login").text)
        form = {"reviewer_id": "carol", "password": "wrong-passphrase", "csrf": token}
        assert browser.post("/login", data=form).status_code == 401
        assert browser.get("/").status_code == 303
    assert console.log == [("carol", "login_refused", {})]


def test_logins_are_rate_limited(console: FakeConsole) -> None:
    with client(console, clock=lambda: 0.0) as browser:  # no refill between the attempts
        token = csrf(browser.get("/login").text)
        form = {"reviewer_id": "carol", "password": "wrong-passphrase", "csrf": token}
        codes = [browser.post("/login", data=form).status_code for _ in range(6)]
    assert codes == [401] * 5 + [429]


def test_the_identity_header_is_believed_from_a_trusted_proxy_only(console: FakeConsole) -> None:
    header = {"X-Forwarded-User": "carol"}
    with client(console, identity_header="X-Forwarded-User") as browser:
        assert browser.get("/", headers=header).status_code == 303  # testclient is not trusted
    trusted = frozenset({"testclient"})
    with client(console, identity_header="X-Forwarded-User", trusted_proxies=trusted) as browser:
        page = browser.get("/", headers=header)
        assert page.status_code == 200 and "carol" in page.text
        claim = browser.post("/queues/adult/claim", headers=header, data={"csrf": csrf(page.text)})
        assert claim.status_code == 303
        assert browser.post("/queues/adult/claim", headers=header, data={}).status_code == 403


def test_the_queues_notice_is_made_from_known_words_only(console: FakeConsole) -> None:
    with client(console) as browser:
        logged_in(browser, "carol", "carol-passphrase")
        decided = browser.get("/", params={"decided": "review-1", "outcome": "BLOCK"}).text
        assert "Decided BLOCK on task review-1" in decided
        forged = browser.get("/", params={"decided": "x", "outcome": "Call 555-0100 now"}).text
        assert "555-0100" not in forged and 'id="notice"' not in forged


def test_a_lead_sees_the_lead_view_and_searches_the_access_log(console: FakeConsole) -> None:
    with client(console) as browser:
        logged_in(browser, "lena", "lena-passphrase-1")
        assert 'id="lead-link"' in browser.get("/").text
        page = browser.get("/lead").text
        assert 'tr data-queue="adult"><td>adult</td><td>1</td><td>2 min</td>' in page
        assert '<tr data-reviewer="carol"><td>carol</td><td>1</td><td>1</td></tr>' in page
        assert '<tr data-reviewer="dave">' not in page
        assert 'data-action="reveal" data-reviewer="carol"' in page
        assert "file:///media/c-1.png" in page and "2025-11-30 00:00:00" in page
        found = browser.get("/lead", params={"reviewer_id": "dave", "action": "refused"}).text
        assert 'data-reviewer="dave"' in found and 'data-action="reveal"' not in found
        assert "No access record matches" in browser.get("/lead", params={"action": "claim"}).text
    looks = [extra["detail"] for who, a, extra in console.log if a == "lead_view"]
    assert looks == ["all", "reviewer_id=dave action=refused", "action=claim"]


def test_a_reviewer_who_is_not_a_lead_is_refused_the_lead_view(console: FakeConsole) -> None:
    with client(console) as browser:
        logged_in(browser, "carol", "carol-passphrase")
        assert 'id="lead-link"' not in browser.get("/").text
        refused = browser.get("/lead")
        assert refused.status_code == 403 and "carol is not a lead" in refused.text
    assert ("carol", "refused", {}) in console.log
