"""A fake review console for tests of the web layer (modstream/console/web.py) without Kafka or
Redis: `FakeConsole` answers what the web layer calls (carol is granted queue `adult`, everyone
else nothing), `client` is a browser on the app over it, `logged_in` logs a reviewer in.

    from modstream.testing.console import FakeConsole, client, logged_in

    with client(FakeConsole()) as browser:
        token = logged_in(browser, "carol", "carol-passphrase")
        assert browser.get("/").status_code == 200

The browser is Starlette's TestClient, which needs httpx (the dev extra).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from modstream.console.accounts import Accounts
from modstream.console.evidence import access_record
from modstream.console.kept_media import MediaText
from modstream.console.lead import AccessQuery, ReviewActivity
from modstream.console.permissions import Refused
from modstream.console.sessions import SessionCodec
from modstream.console.web import WebConfig, build_app
from modstream.review.queue import decision_record
from modstream.testing.records import T0

if TYPE_CHECKING:
    from starlette.testclient import TestClient

# The one task the fake console has: an adult-queue review of c-1 with one kept image.
TASK: dict[str, Any] = {
    "task_id": "review-1",
    "kind": "review",
    "queue": "adult",
    "content_id": "c-1",
    "content_version": 1,
    "decision_revision": 1,
    "policy_version": 1,
    "reasons": ["sexual_content"],
    "evidence": ["file:///media/c-1.png"],
}


class FakeConsole:
    """What the web layer calls; carol is granted `adult`, everyone else nothing."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str, dict[str, Any]]] = []
        self.decided: list[tuple[str, ...]] = []

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def ready(self) -> bool:
        return True

    def audit(self, reviewer: str, action: str, task: Any = None, **extra: Any) -> None:
        self.log.append((reviewer, action, extra))

    def _granted(self, reviewer: str) -> None:
        if reviewer != "carol":
            self.audit(reviewer, "refused")
            raise Refused(f"reviewer {reviewer} holds no grant of queue 'adult'")

    def queues(self, reviewer: str) -> list[dict[str, Any]]:
        return [{"queue": "adult", "depth": 1, "oldest_age_ms": 0}] if reviewer == "carol" else []

    def claim(self, reviewer: str, queue: str) -> dict[str, Any] | None:
        self._granted(reviewer)
        return TASK

    def task(self, reviewer: str, task_id: str) -> dict[str, Any]:
        self._granted(reviewer)
        return TASK

    def view(self, reviewer: str, task_id: str) -> tuple[dict[str, Any], list[Any]]:
        from modstream.console.evidence import evidence_items

        self._granted(reviewer)
        return TASK, evidence_items(TASK)

    def media_text(self, reviewer: str, task_id: str) -> MediaText:
        self._granted(reviewer)
        return MediaText([], [], [], [])  # an image without words (test_kept_media: with)

    def reveal(self, reviewer: str, task_id: str, index: int) -> None:
        self._granted(reviewer)
        self.audit(reviewer, "reveal")

    def decide(self, reviewer: str, task_id: str, outcome: str, reason: str, note: str) -> None:
        self.decided.append((reviewer, task_id, outcome, reason, note))

    def lead_view(self, lead_id: str, leads: frozenset[str], query: AccessQuery) -> dict[str, Any]:
        """The real figures over records the console writes (carol's reveal, her decision)."""
        if lead_id not in leads:
            self.audit(lead_id, "refused")
            raise Refused(f"reviewer {lead_id} is not a lead")
        self.audit(lead_id, "lead_view", detail=query.described())
        activity = ReviewActivity()
        activity.add_access(
            access_record("carol", "reveal", T0, TASK, evidence_ref=TASK["evidence"][0])
        )
        activity.add_access(access_record("dave", "refused", T0 + 1, detail="no grant"))
        activity.add_decision(decision_record(TASK, "carol", "BLOCK", "", T0 + 2))
        activity.add_task(TASK)
        activity.add_decision(decision_record(TASK, "dave", "ALLOW", "", T0 + 2))  # ungranted
        view = activity.view(T0 + 3, query, lambda reviewer, queue, ts: reviewer == "carol")
        return {"queues": [{"queue": "adult", "depth": 1, "oldest_age_ms": 120_000}], **view}

    def reason_codes(self) -> list[str]:
        return ["sexual_content"]

    def notices(self) -> dict[str, str]:
        return {}


# carol, dave and lena (a lead), each with a passphrase.
ACCOUNTS = (
    Accounts({})
    .with_reviewer("carol", "carol-passphrase")
    .with_reviewer("dave", "dave-passphrase-1")
    .with_reviewer("lena", "lena-passphrase-1")
    .with_lead("lena")
)


def client(console: FakeConsole, **web: Any) -> TestClient:
    """A browser on the web layer over `console` (use it as a context manager), with ACCOUNTS."""
    from starlette.testclient import TestClient

    config = WebConfig(accounts=ACCOUNTS, codec=SessionCodec(b"web-test-secret-0123456789"), **web)
    return TestClient(build_app(console, config), follow_redirects=False)  # type: ignore[arg-type]


def csrf(page: str) -> str:
    """The CSRF token a page carries."""
    match = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page)
    assert match is not None
    return match.group(1)


def logged_in(browser: TestClient, reviewer: str, password: str) -> str:
    """Log `reviewer` in through the login form; the CSRF token of the page after it."""
    token = csrf(browser.get("/login").text)
    response = browser.post(
        "/login", data={"reviewer_id": reviewer, "password": password, "csrf": token}
    )
    assert response.status_code == 303, response.text
    return csrf(browser.get("/").text)
