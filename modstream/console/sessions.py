"""Sessions, CSRF tokens and rate limits of the console: pure, the clock passed in.

- A session is a cookie signed and timestamped with itsdangerous (what Starlette's own session
  middleware uses): `{sid, reviewer_id}`; a new `sid` at every login, so a session fixed before
  login is worth nothing after it. The cookie is HttpOnly and SameSite=Strict (web.py).
- The CSRF token of a session is an HMAC of its `sid` under the server's secret (the
  synchronizer token without server-side storage): every POST carries it in a form field or the
  `X-CSRF-Token` header, and a token from another session or none is refused.
- The rate limit is a token bucket per reviewer (per client address before login): a burst,
  then a steady rate; what passes it is still checked for everything else.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

from itsdangerous import BadSignature, URLSafeTimedSerializer

SESSION_COOKIE = "modstream_console"
SESSION_MAX_AGE_S = 8 * 3600  # a reviewer's shift
SECRET_VARIABLE = "MODSTREAM_CONSOLE_SECRET"


@dataclass(frozen=True)
class Session:
    """Who this browser is: `reviewer_id` None before login."""

    sid: str
    reviewer_id: str | None = None

    @classmethod
    def anonymous(cls) -> Session:
        return cls(secrets.token_urlsafe(18))

    def logged_in(self, reviewer_id: str) -> Session:
        """A new session id for the reviewer (no session fixation)."""
        return Session(secrets.token_urlsafe(18), reviewer_id)


class SessionCodec:
    """Session <-> cookie value, signed and time-limited; CSRF tokens of a session."""

    def __init__(self, secret: bytes, max_age_s: int = SESSION_MAX_AGE_S) -> None:
        if len(secret) < 16:
            raise ValueError(f"console: {SECRET_VARIABLE} must be at least 16 bytes")
        self._secret = secret
        self._serializer = URLSafeTimedSerializer(secret, salt="modstream-console-session")
        self.max_age_s = max_age_s

    def dump(self, session: Session) -> str:
        return str(self._serializer.dumps({"sid": session.sid, "rid": session.reviewer_id}))

    def load(self, cookie: str | None) -> Session | None:
        """The session a cookie holds; None when absent, forged, malformed or expired."""
        if not cookie:
            return None
        try:
            raw = self._serializer.loads(cookie, max_age=self.max_age_s)
        except BadSignature:  # SignatureExpired included
            return None
        if not isinstance(raw, dict) or not isinstance(raw.get("sid"), str):
            return None
        reviewer_id = raw.get("rid")
        return Session(raw["sid"], reviewer_id if isinstance(reviewer_id, str) else None)

    def csrf_token(self, session: Session) -> str:
        return hmac.new(self._secret, b"csrf:" + session.sid.encode(), hashlib.sha256).hexdigest()

    def csrf_valid(self, session: Session, token: str | None) -> bool:
        if not token:
            return False
        return hmac.compare_digest(self.csrf_token(session).encode(), token.encode())


@dataclass
class RateLimiter:
    """A token bucket per key: `burst` requests at once, refilled at `per_second`."""

    per_second: float = 2.0
    burst: float = 20.0
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)
    max_keys: int = 100_000

    def allow(self, key: str, now_s: float) -> bool:
        """Take one token from `key`'s bucket at `now_s`; False when it is empty."""
        tokens, last = self._buckets.get(key, (self.burst, now_s))
        tokens = min(self.burst, tokens + max(0.0, now_s - last) * self.per_second)
        allowed = tokens >= 1.0
        if len(self._buckets) >= self.max_keys and key not in self._buckets:
            self._buckets.clear()  # bounded memory: a full table starts over (full buckets)
        self._buckets[key] = (tokens - 1.0 if allowed else tokens, now_s)
        return allowed
