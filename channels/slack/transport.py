"""How Slack's requests reach the Bolt app: Socket Mode (a WebSocket Krill opens, kept alive
with its own reconnect policy) or the Events API (`POST /slack/events` on Krill's server).

Both hand every request to `AsyncApp.async_dispatch`; the app is built with
`process_before_response=True`, so the acknowledgement leaves only after the listener has
recorded the event durably.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier

from bot.backoff import Backoff
from bot.errors import KrillError

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
# Button presses (the app's Interactivity Request URL); the events URL takes them too.
INTERACTIVITY_PATH = "/slack/interactivity"
# Events that arrive while the adapter is still starting wait this long, then get a 503
# (Slack retries them).
STARTUP_WAIT_SECONDS = 10.0
# Socket Mode: how often the connection is checked, how long one connection attempt may
# take, and the reconnect backoff (doubling from the first delay up to the cap).
WATCH_INTERVAL_SECONDS = 1.0
CONNECT_TIMEOUT_SECONDS = 15.0
BACKOFF_FIRST_SECONDS = 1.0
BACKOFF_CAP_SECONDS = 30.0
DEFAULT_PING_INTERVAL = 5.0
# Seconds without a pong after which the socket counts as down (/healthz).
STALE_AFTER = 90.0
# apps.connections.open errors no retry can fix: the app-level token is wrong.
FATAL_TOKEN_ERRORS = frozenset(
    {"invalid_auth", "not_authed", "token_revoked", "account_inactive", "not_allowed_token_type"}
)


class SlackSetupError(KrillError):
    """Slack refused Krill's credentials; the message says which setting to fix."""


def signature_ok(verifier: SignatureVerifier, body: bytes, headers: Mapping[str, str]) -> bool:
    """Slack's v0 request signature check that never raises (a garbled timestamp is invalid;
    a timestamp hundreds of digits long overflows the clock comparison)."""
    try:
        return verifier.is_valid_request(body, dict(headers))
    except (ValueError, TypeError, ArithmeticError):
        return False


class HttpEvents:
    """The Events API and interactivity endpoints: signature check (with its replay window),
    then Bolt; malformed bodies get a 400."""

    def __init__(self, app: AsyncApp, signing_secret: str, ready: asyncio.Event):
        self.app = app
        self.verifier = SignatureVerifier(signing_secret)
        self.ready = ready

    def routes(self) -> list[web.RouteDef]:
        return [web.post(EVENTS_PATH, self.handle), web.post(INTERACTIVITY_PATH, self.handle)]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        # request.read() honours the server's client_max_size and raises 413 above it.
        body = await request.read()
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            # Slack sends UTF-8 only; the signature check would fail on it too, but the
            # fault is the body, not a forged request.
            log.warning("slack: refused a request to %s whose body is not UTF-8", request.path)
            return web.json_response(
                {"error": "body is not UTF-8"}, status=400, headers={"X-Slack-No-Retry": "1"}
            )
        if not signature_ok(self.verifier, body, request.headers):
            log.warning(
                "slack: refused a request to %s with a bad signature or stale timestamp",
                request.path,
            )
            return web.json_response({"error": "invalid request"}, status=401)
        try:
            await asyncio.wait_for(self.ready.wait(), STARTUP_WAIT_SECONDS)
        except TimeoutError:
            return web.json_response({"error": "starting"}, status=503)
        try:
            bolt_request = await to_bolt_request(request)
            if not isinstance(bolt_request.body, dict):
                raise TypeError("the body is not an object")
            if not isinstance(bolt_request.body.get("event", {}), dict):
                raise TypeError("the event is not an object")
        # RecursionError: JSON nested thousands deep.
        except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as exc:
            log.warning("slack: malformed request body (%s)", exc)
            # A signed body Slack cannot fix by resending: ask it not to retry.
            return web.json_response(
                {"error": "malformed body"}, status=400, headers={"X-Slack-No-Retry": "1"}
            )
        response = await self.app.async_dispatch(bolt_request)
        if response.status == 404:
            # A signed request of a kind Krill has no listener for (e.g. `app_rate_limited`):
            # acknowledge it, since Slack retries failures and disables apps that keep failing.
            log.info("slack: ignoring a %r request", bolt_request.body.get("type"))
            return web.Response(status=200)
        return await to_aiohttp_response(response)


class SocketTransport:
    """Socket Mode through Bolt's handler, with one owner of reconnecting: this class.

    The SDK's own reconnect retries a fixed interval and can reuse an expired URL, so it
    is switched off; a watcher reconnects with a fresh URL and exponential backoff.
    Slack's own "disconnect" (refresh) messages are still answered by the SDK at once.
    """

    def __init__(
        self,
        app: AsyncApp,
        app_token: str,
        *,
        ping_interval: float = DEFAULT_PING_INTERVAL,
        stale_after: float = STALE_AFTER,
    ):
        self.app = app
        self.app_token = app_token
        self.ping_interval = ping_interval
        self.stale_after = stale_after
        self._connected_at = 0.0  # wall clock, like the SDK's ping-pong time
        self.handler: AsyncSocketModeHandler | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._closing = False
        # When the connection was lost or first failed to open, until it is back (epoch).
        self.failing_since: float | None = None

    async def start(self) -> None:
        """Connect, retrying with backoff; raises SlackSetupError if the token is refused."""
        self.handler = AsyncSocketModeHandler(
            self.app, self.app_token, ping_interval=self.ping_interval
        )
        self.handler.client.default_auto_reconnect_enabled = False
        backoff = Backoff(BACKOFF_FIRST_SECONDS, BACKOFF_CAP_SECONDS)
        while True:
            try:
                await self._connect()
                break
            except SlackApiError as exc:
                error = str(exc.response.get("error", ""))
                if error in FATAL_TOKEN_ERRORS:
                    await self.handler.close_async()
                    raise SlackSetupError(
                        f"Slack refused slack.app_token ({error}); it must be an app-level "
                        "token (xapp-...) with the connections:write scope"
                    ) from exc
                delay = self._failed(exc, backoff)
            except (OSError, TimeoutError) as exc:
                delay = self._failed(exc, backoff)
            await asyncio.sleep(delay)
        log.info("slack: connected over Socket Mode")
        self.failing_since = None
        self._watcher = asyncio.create_task(self._watch(), name="slack-socket-watch")

    def _failed(self, exc: BaseException, backoff: Backoff) -> float:
        delay = backoff.next()
        self.failing_since = self.failing_since or time.time()
        log.warning("slack: Socket Mode connection failed (%s); retrying in %.0fs", exc, delay)
        return delay

    async def _connect(self) -> None:
        assert self.handler is not None
        client = self.handler.client
        async with client.connect_operation_lock:
            if await client.is_connected():
                return  # a refresh Slack asked for already reconnected meanwhile
            # A fresh URL every time: the URLs apps.connections.open hands out expire.
            client.wss_uri = await client.issue_new_wss_url()
            await asyncio.wait_for(client.connect(), CONNECT_TIMEOUT_SECONDS)
            self._connected_at = time.time()

    @property
    def healthy(self) -> bool:
        """A pong (or the connection itself) within the last `stale_after` seconds."""
        if self.handler is None or self._closing:
            return False
        # The SDK records the send time of the last ping Slack answered.
        last_pong = self.handler.client.last_ping_pong_time or 0.0
        return time.time() - max(last_pong, self._connected_at) <= self.stale_after

    async def _watch(self) -> None:
        assert self.handler is not None
        client = self.handler.client
        backoff = Backoff(BACKOFF_FIRST_SECONDS, BACKOFF_CAP_SECONDS)
        while not self._closing:
            await asyncio.sleep(WATCH_INTERVAL_SECONDS)
            if await client.is_connected():
                backoff.reset()
                self.failing_since = None
                continue
            self.failing_since = self.failing_since or time.time()
            log.warning("slack: Socket Mode connection lost; reconnecting")
            try:
                await self._connect()
            except Exception as exc:  # keep trying whatever failed; the log says what
                await asyncio.sleep(self._failed(exc, backoff))
            else:
                log.info("slack: reconnected over Socket Mode")
                backoff.reset()

    async def stop(self) -> None:
        self._closing = True
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        if self.handler is not None:
            await self.handler.close_async()
