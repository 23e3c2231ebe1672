"""Who may use the console: the operator's token as a Bearer header, or a login (the cookie
the login form sets, bot/console/logins.py), and a same-origin check on every request that
changes something.

A wrong token is counted after the comparison (bot/wrong_tokens.py): the right token is
always accepted, whatever anyone else guessed. The cookie holds a random login id, never
the token, so nothing the browser keeps or the page shows can be replayed as the token (the
log redacts the token too).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable, Sequence
from urllib.parse import urlsplit

from aiohttp import web

from bot.console.logins import Logins
from bot.forwarded import Client, Network, client_of
from bot.store.budgets import BudgetName
from bot.store.shared_state import SharedStateStore
from bot.wrong_tokens import WrongTokens

log = logging.getLogger(__name__)

COOKIE = "krill_admin"
LOGIN_PATH = "/admin/login"
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
    def __init__(
        self, token: str, store: SharedStateStore, trusted_proxies: Sequence[Network]
    ) -> None:
        self._token = token.encode()
        self.logins = Logins(store, token)
        self._wrong = WrongTokens(store, BudgetName.CONSOLE_LOGINS)
        self._proxies = trusted_proxies

    def client(self, request: web.Request) -> Client:
        return client_of(request.remote, request.headers, self._proxies, direct_tls=request.secure)

    def token_matches(self, candidate: str) -> bool:
        return hmac.compare_digest(candidate.encode(), self._token)

    async def refuse_wrong_token(self, request: web.Request) -> Refused:
        """Count a wrong token; the refusal to answer it with (429 beyond the limits)."""
        address = self.client(request).address
        wait = await self._wrong.count(address)
        if wait:
            return Refused(429, "too many wrong tokens; wait a minute", retry_after=wait)
        # Only counted ones are logged: the limits bound how fast guesses fill the log.
        log.warning("console: a wrong token from %s", address)
        return Refused(401, "wrong token")

    async def authenticate(self, request: web.Request) -> None:
        """Raise Refused unless the request carries the token (Bearer) or a live login, and,
        when a login's request changes something, comes from this server's own pages."""
        header = request.headers.get("Authorization", "")
        if header:
            scheme, _, value = header.partition(" ")
            if scheme.lower() == "bearer" and self.token_matches(value.strip()):
                # A page on another site cannot send this header without a CORS preflight
                # we never grant, and the browser guard already refuses a foreign Origin.
                return
            raise await self.refuse_wrong_token(request)
        cookie = request.cookies.get(COOKIE, "")
        if not cookie:
            raise Refused(401, "log in with the console token")
        # A login id is random and long: an unknown one is an ended login, not a guess.
        if not await self.logins.valid(cookie):
            raise Refused(401, "the login has ended; log in again")
        if request.method not in SAFE_METHODS and not same_origin(request):
            raise Refused(403, "cross-origin requests are not allowed")
