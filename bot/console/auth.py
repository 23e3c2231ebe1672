"""Who may use the console: the operator's token, as a Bearer header or as the cookie the
login form sets, with wrong tokens rate-limited per client address (counted in the store,
so several replicas behind one proxy allow them once in total), and a same-origin check on
every request that changes something.

The cookie holds an HMAC of the token, never the token itself, so nothing the browser keeps
or the page shows can be replayed as the token elsewhere (the log redacts the token too).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from aiohttp import web

from bot.store.budgets import BudgetName, SenderBudget
from bot.store.shared_state import SharedStateStore

COOKIE = "krill_admin"
COOKIE_LABEL = b"krill console cookie v1"
LOGIN_PATH = "/admin/login"
# Wrong tokens allowed per client address in each window before it gets 429.
MAX_FAILURES = 5
FAILURE_WINDOW_SECONDS = 60.0
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Refused(Exception):
    """A request the console turns away: its status and what to say."""

    def __init__(self, status: int, message: str, *, retry_after: float = 0.0) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


def same_origin(request: web.Request) -> bool:
    """Whether a state-changing request comes from a page of this server: its `Origin`
    (or, from older browsers, `Referer`) must name the `Host` it was sent to."""
    source = request.headers.get("Origin") or request.headers.get("Referer")
    if not source:
        return False
    return urlsplit(source).netloc.lower() == request.headers.get("Host", "").strip().lower()


class ConsoleAuth:
    def __init__(self, token: str, store: SharedStateStore) -> None:
        self._token = token.encode()
        self._cookie = hmac.new(self._token, COOKIE_LABEL, hashlib.sha256).hexdigest()
        self._failures = SenderBudget(
            store, BudgetName.CONSOLE_LOGINS, limit=MAX_FAILURES, window=FAILURE_WINDOW_SECONDS
        )

    def token_matches(self, candidate: str) -> bool:
        return hmac.compare_digest(candidate.encode(), self._token)

    def cookie_value(self) -> str:
        return self._cookie

    def _client(self, request: web.Request) -> str:
        return request.remote or "unknown"

    async def check_rate(self, request: web.Request) -> None:
        """Refuse (429) a client that sent too many wrong tokens lately."""
        if await self._failures.left(self._client(request)) == 0:
            raise Refused(
                429, "too many wrong tokens; wait a minute", retry_after=FAILURE_WINDOW_SECONDS
            )

    async def record_failure(self, request: web.Request) -> None:
        await self._failures.record([self._client(request)])

    async def authenticate(self, request: web.Request) -> None:
        """Raise Refused unless the request carries the token (Bearer) or the login cookie,
        and, when a cookie-carrying request changes something, comes from this server's own
        pages."""
        await self.check_rate(request)
        header = request.headers.get("Authorization", "")
        if header:
            scheme, _, value = header.partition(" ")
            if scheme.lower() != "bearer" or not self.token_matches(value.strip()):
                await self.record_failure(request)
                raise Refused(401, "wrong token")
            # A page on another site cannot send this header without a CORS preflight we
            # never grant, and the browser guard already refuses a foreign Origin.
            return
        cookie = request.cookies.get(COOKIE, "")
        if not cookie:
            raise Refused(401, "log in with the console token")
        if not hmac.compare_digest(cookie.encode(), self._cookie.encode()):
            await self.record_failure(request)
            raise Refused(401, "the login has expired; log in again")
        if request.method not in SAFE_METHODS and not same_origin(request):
            raise Refused(403, "cross-origin requests are not allowed")
