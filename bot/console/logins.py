"""Console logins: each login gets a new random id, which is the cookie. The store's shared
state keeps it (so every replica knows it) under a digest of the id, so what the store
holds cannot be replayed as a cookie. A login ends at logout, after IDLE_SECONDS without a
request, LIFETIME_SECONDS after it began whatever happens, or when the console token
changes."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from bot.store.shared_state import SharedStateStore

SCOPE = "console_login"
IDLE_SECONDS = 12 * 3600.0
LIFETIME_SECONDS = 7 * 86400.0
# A request this soon after the last recorded one does not rewrite the row: the idle
# deadline is kept to within this much, without a write on every page.
TOUCH_EVERY_SECONDS = 60.0
TOKEN_LABEL = b"krill console login v2"


@dataclass(frozen=True, slots=True)
class Login:
    started: float
    seen: float  # the last request that moved the idle deadline
    token: str  # which console token it was made with (a fingerprint, not the token)

    def expires_at(self) -> float:
        return min(self.seen + IDLE_SECONDS, self.started + LIFETIME_SECONDS)


def _key(login_id: str) -> str:
    return hashlib.sha256(login_id.encode()).hexdigest()


def _parse(value: str) -> Login | None:
    try:
        data = json.loads(value)
        return Login(float(data["started"]), float(data["seen"]), str(data["token"]))
    except (ValueError, KeyError, TypeError):
        return None


class Logins:
    def __init__(
        self, store: SharedStateStore, token: str, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.store = store
        self.clock = clock  # wall-clock time: the replicas compare it
        self._token = hmac.new(token.encode(), TOKEN_LABEL, hashlib.sha256).hexdigest()

    async def _put(self, login_id: str, login: Login, expires_at: float, now: float) -> None:
        value = json.dumps({"started": login.started, "seen": login.seen, "token": login.token})
        await self.store.state_put(SCOPE, _key(login_id), value, expires_at, now)

    async def start(self) -> str:
        """A new login; its id, for the cookie."""
        login_id = secrets.token_urlsafe(32)
        now = self.clock()
        login = Login(now, now, self._token)
        await self._put(login_id, login, login.expires_at(), now)
        return login_id

    async def valid(self, login_id: str) -> bool:
        """Whether `login_id` is a login that has not ended; a use moves its idle deadline."""
        if not login_id:
            return False
        now = self.clock()
        stored = await self.store.state_get(SCOPE, _key(login_id), now)
        login = _parse(stored) if stored is not None else None
        if login is None or not hmac.compare_digest(login.token, self._token):
            return False
        if now - login.seen >= TOUCH_EVERY_SECONDS:
            touched = Login(login.started, now, login.token)
            await self._put(login_id, touched, touched.expires_at(), now)
        return True

    async def end(self, login_id: str) -> None:
        """Log out: the id is forgotten on every replica at once."""
        if login_id:
            now = self.clock()
            await self.store.state_put(SCOPE, _key(login_id), "", now, now)
