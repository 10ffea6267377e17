"""The console's web layer (Starlette, server-rendered Jinja2, one plain JS file): routes that
read who the reviewer is, check the CSRF token and the rate limit, call `Console` and render.
Nothing here decides a permission; `Console` and `permissions` do (docs/REVIEW.md).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from modstream.console.accounts import Accounts
from modstream.console.lead import AccessQuery
from modstream.console.permissions import OUTCOMES, Refused, sensitive
from modstream.console.service import Console
from modstream.console.sessions import SESSION_COOKIE, RateLimiter, Session, SessionCodec

HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=str(HERE / "templates"))


def utc(ms: int) -> str:
    """An event time (ms since the epoch) as the lead view shows it."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


templates.env.filters["utc"] = utc
# The page may load its own script, style and images only; no frame may embed it.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self'; script-src 'self'; "
    "style-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}


@dataclass
class WebConfig:
    """Identity: the password accounts, or a header set by a trusted proxy (both documented
    in docs/REVIEW.md); cookies `Secure` where the console is served over TLS."""

    accounts: Accounts
    codec: SessionCodec
    identity_header: str | None = None
    trusted_proxies: frozenset[str] = frozenset()
    secure_cookies: bool = False
    limiter: RateLimiter = field(default_factory=RateLimiter)
    login_limiter: RateLimiter = field(default_factory=lambda: RateLimiter(0.1, 5.0))
    clock: Callable[[], float] = time.monotonic  # seconds, for the rate limits


# A video frame at a reader's finding: evidence `index` of the task at `at_ms` (one the page shows).
FRAME = "/tasks/{task_id}/evidence/{index:int}/frame/{at_ms:int}"
Handler = Callable[[Request], Awaitable[Response]]
Action = Callable[[Request, str], Awaitable[Response]]


class ConsoleWeb:
    """The routes: each reads who the reviewer is (`reviewer_of`), passes `guarded`'s checks,
    calls `Console` in a worker thread (Kafka, Redis and scrypt block) and renders."""

    def __init__(self, console: Console, web: WebConfig) -> None:
        self.console, self.web = console, web

    def session_of(self, request: Request) -> Session:
        return self.web.codec.load(request.cookies.get(SESSION_COOKIE)) or Session.anonymous()

    def reviewer_of(self, request: Request) -> str | None:
        """The session's reviewer, or with an identity header the header's value, believed only
        from a trusted proxy's address."""
        if self.web.identity_header:
            host = request.client.host if request.client else ""
            if host not in self.web.trusted_proxies:
                return None
            return request.headers.get(self.web.identity_header) or None
        return self.session_of(request).reviewer_id

    def page(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        session = self.session_of(request)
        reviewer = self.reviewer_of(request)
        context |= {
            "reviewer": reviewer,
            "lead": reviewer in self.web.accounts.leads,
            "csrf": self.web.codec.csrf_token(session),
        }
        response = templates.TemplateResponse(request, name, context, status_code=status)
        return self.keep(response, session)

    def keep(self, response: Response, session: Session) -> Response:
        """The session cookie (HttpOnly, SameSite=Strict) and the security headers."""
        response.set_cookie(
            SESSION_COOKIE, self.web.codec.dump(session), max_age=self.web.codec.max_age_s,
            httponly=True, samesite="strict", secure=self.web.secure_cookies,
        )  # fmt: skip
        response.headers.update(SECURITY_HEADERS)
        return response

    async def csrf_ok(self, request: Request) -> bool:
        """The session's CSRF token, from the `X-CSRF-Token` header or the form's `csrf`."""
        token = request.headers.get("x-csrf-token")
        if token is None:
            token = str((await request.form()).get("csrf") or "")
        return self.web.codec.csrf_valid(self.session_of(request), token)

    def guarded(self, action: Action) -> Handler:
        """Logged in, under the rate limit, and for a POST with the session's CSRF token; a
        refusal is a 403 (a page for a GET) and is already in the access log."""

        async def run(request: Request) -> Response:
            reviewer = self.reviewer_of(request)
            if reviewer is None:
                if request.method == "GET":
                    return RedirectResponse("/login", status_code=303)
                return JSONResponse({"error": "not logged in"}, status_code=401)
            if not self.web.limiter.allow(reviewer, self.web.clock()):
                return JSONResponse({"error": "too many requests"}, status_code=429)
            if request.method == "POST" and not await self.csrf_ok(request):
                await run_in_threadpool(self.console.audit, reviewer, "refused", detail="csrf")
                return JSONResponse({"error": "missing or wrong CSRF token"}, status_code=403)
            try:
                return await action(request, reviewer)
            except Refused as refused:
                if request.method == "GET":
                    return self.page(request, "refused.html", 403, message=str(refused))
                return JSONResponse({"error": str(refused)}, status_code=403)

        return run

    async def login_form(self, request: Request) -> Response:
        return self.page(request, "login.html")

    async def login(self, request: Request) -> Response:
        """Password login: CSRF (a login form of this session), a per-address-and-id limit,
        then scrypt; a new session id on success."""
        form = await request.form()
        session = self.session_of(request)
        host = request.client.host if request.client else "-"
        reviewer_id = str(form.get("reviewer_id") or "")[:256]
        if not self.web.codec.csrf_valid(session, str(form.get("csrf") or "")):
            return self.page(request, "login.html", 403, error="The form expired; try again.")
        if not self.web.login_limiter.allow(f"{host}:{reviewer_id}", self.web.clock()):
            return self.page(request, "login.html", 429, error="Too many attempts; wait a minute.")
        password = str(form.get("password") or "")
        if not await run_in_threadpool(self.web.accounts.authenticate, reviewer_id, password):
            if reviewer_id:
                await run_in_threadpool(self.console.audit, reviewer_id, "login_refused")
            return self.page(
                request, "login.html", 401, error="Unknown reviewer or wrong password."
            )
        await run_in_threadpool(self.console.audit, reviewer_id, "login")
        return self.keep(RedirectResponse("/", status_code=303), session.logged_in(reviewer_id))

    async def logout(self, request: Request, reviewer: str) -> Response:
        return self.keep(RedirectResponse("/login", status_code=303), Session.anonymous())

    async def home(self, request: Request, reviewer: str) -> Response:
        queues = await run_in_threadpool(self.console.queues, reviewer)
        return self.page(request, "queues.html", queues=queues, notice=notice(request))

    async def claim(self, request: Request, reviewer: str) -> Response:
        queue = request.path_params["queue"]
        task = await run_in_threadpool(self.console.claim, reviewer, queue)
        if task is None:
            return RedirectResponse(f"/?{urlencode({'empty': queue})}", status_code=303)
        return RedirectResponse(f"/tasks/{quote(task['task_id'])}", status_code=303)

    async def show(self, request: Request, reviewer: str) -> Response:
        task_id = request.path_params["task_id"]
        task, items = await run_in_threadpool(self.console.view, reviewer, task_id)
        media_text = await run_in_threadpool(self.console.media_text, reviewer, task_id)
        return self.page(
            request, "task.html", task=task, evidence=items, blurred=sensitive(task),
            media_text=media_text, outcomes=OUTCOMES, reason_codes=self.console.reason_codes(),
            notices=self.console.notices(),
        )  # fmt: skip

    async def evidence(self, request: Request, reviewer: str) -> Response:
        task_id, index = request.path_params["task_id"], int(request.path_params["index"])
        data, mime = await run_in_threadpool(self.console.evidence, reviewer, task_id, index)
        response = Response(data, media_type=mime)
        response.headers.update(SECURITY_HEADERS | {"Content-Disposition": "inline"})
        return response

    async def frame(self, request: Request, reviewer: str) -> Response:
        """A video frame at a reader's finding, rendered by the server."""
        params = request.path_params
        data, mime = await run_in_threadpool(
            self.console.frame, reviewer, params["task_id"], int(params["index"]),
            int(params["at_ms"]),
        )  # fmt: skip
        response = Response(data, media_type=mime)
        response.headers.update(SECURITY_HEADERS | {"Content-Disposition": "inline"})
        return response

    async def reveal_frame(self, request: Request, reviewer: str) -> Response:
        params = request.path_params
        index, at_ms = int(params["index"]), int(params["at_ms"])
        await run_in_threadpool(
            self.console.reveal_frame, reviewer, params["task_id"], index, at_ms
        )  # fmt: skip
        return JSONResponse({"revealed": index, "at_ms": at_ms})

    async def reveal(self, request: Request, reviewer: str) -> Response:
        task_id, index = request.path_params["task_id"], int(request.path_params["index"])
        await run_in_threadpool(self.console.reveal, reviewer, task_id, index)
        return JSONResponse({"revealed": index})

    async def decide(self, request: Request, reviewer: str) -> Response:
        """The decision on Kafka (acknowledged) first; then the next task, or the queues."""
        form = await request.form()
        task_id = request.path_params["task_id"]
        outcome, reason = str(form.get("outcome") or ""), str(form.get("reason") or "")
        note = str(form.get("note") or "")
        task = await run_in_threadpool(self.console.task, reviewer, task_id)
        await run_in_threadpool(self.console.decide, reviewer, task_id, outcome, reason, note)
        if form.get("next"):
            following = await run_in_threadpool(self.console.claim, reviewer, task["queue"])
            if following is not None:
                return RedirectResponse(f"/tasks/{quote(following['task_id'])}", status_code=303)
        done = urlencode({"decided": task_id, "outcome": outcome})
        return RedirectResponse(f"/?{done}", status_code=303)

    async def lead(self, request: Request, reviewer: str) -> Response:
        """The lead view: every queue, throughput, agreement, the access log searched."""
        query = AccessQuery.of(request.query_params)
        leads = self.web.accounts.leads
        view = await run_in_threadpool(self.console.lead_view, reviewer, leads, query)
        return self.page(request, "lead.html", query=query, **view)

    async def health(self, request: Request) -> Response:
        ready = self.console.ready()
        return JSONResponse({"ready": ready}, status_code=200 if ready else 503)

    def routes(self) -> list[BaseRoute]:
        guarded = self.guarded
        return [
            Route("/login", self.login_form, methods=["GET"]),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", guarded(self.logout), methods=["POST"]),
            Route("/", guarded(self.home), methods=["GET"]),
            Route("/queues/{queue}/claim", guarded(self.claim), methods=["POST"]),
            Route("/tasks/{task_id}", guarded(self.show), methods=["GET"]),
            Route("/tasks/{task_id}/evidence/{index:int}", guarded(self.evidence), methods=["GET"]),
            Route("/tasks/{task_id}/reveal/{index:int}", guarded(self.reveal), methods=["POST"]),
            Route(FRAME, guarded(self.frame), methods=["GET"]),
            Route(f"{FRAME}/reveal", guarded(self.reveal_frame), methods=["POST"]),
            Route("/tasks/{task_id}/decide", guarded(self.decide), methods=["POST"]),
            Route("/lead", guarded(self.lead), methods=["GET"]),
            Route("/healthz", self.health, methods=["GET"]),
            Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
        ]


def notice(request: Request) -> str | None:
    """The queues page's line after a claim of an empty queue or a decision; made here from
    known words, so the address cannot put a sentence of its choosing on the page."""
    params = request.query_params
    if params.get("outcome") in OUTCOMES and params.get("decided"):
        return f"Decided {params['outcome']} on task {params['decided'][:256]}"
    if params.get("empty"):
        return f"Queue {params['empty'][:256]} has no task waiting"
    return None


def build_app(console: Console, web: WebConfig) -> Starlette:
    """The ASGI app; the console's followers start and stop with it."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        console.start()
        yield
        console.stop()

    return Starlette(routes=ConsoleWeb(console, web).routes(), lifespan=lifespan)
