"""The console's routes on the shared server: every page behind `ConsoleAuth`, the login
form and logout, the page's own script and style, and, with no token configured, a 404
that says how to turn the console on."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from functools import partial
from importlib import resources
from zoneinfo import ZoneInfo

from aiohttp import web
from markupsafe import Markup

from bot.channel_contract import ChannelHealth
from bot.config import Config
from bot.console import workspace_files
from bot.console.auth import COOKIE, LOGIN_PATH, ConsoleAuth, Handler, Refused, same_origin
from bot.console.costs_page import CostsPage
from bot.console.jobs_page import JobControl, JobsPage
from bot.console.layout import notice, page
from bot.console.media_view import MediaReader, MediaRoute
from bot.console.memory_page import MemoryPage
from bot.console.operations_pages import ModelFigures, OperationsPages
from bot.console.overview import overview_row
from bot.console.sessions_pages import SessionControl, SessionsPages
from bot.console.workspace_pages import PromptShares, WorkspacePages
from bot.log_tail import RECENT
from bot.media.usage import data_use
from bot.memory.index import MemoryIndex
from bot.metrics import Metrics
from bot.store.base import Store

log = logging.getLogger(__name__)

STATIC_FILES = {"console.css": "text/css", "console.js": "text/javascript"}
OFF_MESSAGE = (
    "The operator console is off: set admin.console_token in krill.toml "
    "(or KRILL_ADMIN_TOKEN) and restart."
)


def _wants_page(request: web.Request) -> bool:
    return request.method == "GET" and "text/html" in request.headers.get("Accept", "")


def _next_path(value: str) -> str:
    """Where to go after logging in: a console path only, never another site."""
    return value if value.startswith("/admin") and not value.startswith("//") else "/admin"


def _retry_after(refused: Refused) -> dict[str, str]:
    return {"Retry-After": str(math.ceil(refused.retry_after))} if refused.retry_after else {}


def login_page(message: str = "", *, next_path: str = "/admin", status: int = 200) -> web.Response:
    body = Markup(
        '{}<form class="login" method="post" action="{}">'
        '<input type="hidden" name="next" value="{}">'
        '<label>Console token <input type="password" name="token" autocomplete="current-password"'
        ' required autofocus data-testid="login-token"></label>'
        '<button data-testid="login-submit">Log in</button></form>'
    ).format(notice(message, kind="error") if message else "", LOGIN_PATH, _next_path(next_path))
    return page("Log in", body, status=status, nav=False)


def static_routes() -> list[web.RouteDef]:
    async def serve(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in STATIC_FILES:
            raise web.HTTPNotFound()
        data = resources.files("bot.console").joinpath("static", name).read_bytes()
        return web.Response(body=data, content_type=STATIC_FILES[name])

    return [web.get("/admin/static/{name}", serve)]


def console_off_routes() -> list[web.RouteDef]:
    async def off(request: web.Request) -> web.Response:
        return web.Response(status=404, text=OFF_MESSAGE)

    return [web.route("*", "/admin{tail:.*}", off)]


class Console:
    """The console's routes: `pages` are the pages' own routes, each put behind the token."""

    def __init__(self, auth: ConsoleAuth, pages: list[web.RouteDef]) -> None:
        self.auth = auth
        self.pages = pages

    def routes(self) -> list[web.RouteDef]:
        guarded = [web.route(r.method, r.path, self._guard(r.handler)) for r in self.pages]
        return [
            web.get(LOGIN_PATH, self.login_form),
            web.post(LOGIN_PATH, self.login),
            web.post("/admin/logout", self.logout),
            *static_routes(),
            *guarded,
        ]

    def _guard(self, handler: Handler) -> Handler:
        async def guarded(request: web.Request) -> web.StreamResponse:
            try:
                await self.auth.authenticate(request)
            except Refused as refused:
                return self._refusal(request, refused)
            return await handler(request)

        return guarded

    def _refusal(self, request: web.Request, refused: Refused) -> web.Response:
        if refused.status == 401 and _wants_page(request):
            return login_page(next_path=request.path_qs, status=401)
        response = web.Response(
            status=refused.status, text=str(refused), headers=_retry_after(refused)
        )
        if refused.status == 401:
            response.headers["WWW-Authenticate"] = 'Bearer realm="krill console"'
        return response

    async def login_form(self, request: web.Request) -> web.Response:
        return login_page(next_path=request.query.get("next", "/admin"))

    async def login(self, request: web.Request) -> web.Response:
        form = await request.post()
        next_path = str(form.get("next", "/admin"))
        if not same_origin(request):
            return web.Response(status=403, text="cross-origin requests are not allowed")
        if not self.auth.token_matches(str(form.get("token", ""))):
            refused = await self.auth.refuse_wrong_token(request)
            if refused.status == 429:
                answer = login_page(str(refused), next_path=next_path, status=429)
                answer.headers.update(_retry_after(refused))
                return answer
            return login_page("That is not the console token.", next_path=next_path, status=401)
        login_id = await self.auth.logins.start()
        response = web.HTTPSeeOther(_next_path(next_path))
        response.set_cookie(
            COOKIE,
            login_id,
            path="/admin",
            httponly=True,
            samesite="Strict",
            secure=self.auth.client(request).https,
        )
        raise response

    async def logout(self, request: web.Request) -> web.Response:
        if not same_origin(request):
            return web.Response(status=403, text="cross-origin requests are not allowed")
        await self.auth.logins.end(request.cookies.get(COOKIE, ""))
        response = web.HTTPSeeOther(LOGIN_PATH)
        response.del_cookie(COOKIE, path="/admin")
        raise response


def console_routes(
    *,
    config: Config,
    store: Store,
    workspace: PromptShares,
    index: MemoryIndex | None,
    control: SessionControl,
    health: Callable[[], Mapping[str, ChannelHealth]],
    since: Callable[[], Mapping[str, float]],
    wake_sender: Callable[[], None],
    media: MediaReader,
    jobs: JobControl,
    models: ModelFigures,
    metrics: Metrics,
) -> list[web.RouteDef]:
    """Every console route, or only the "console is off" answer without a token. The
    temporary files of saves a kill interrupted are removed first."""
    for leftover in workspace_files.remove_leftovers(config.workspace_dir):
        log.info("console: removed %s, left by a save that never finished", leftover)
    token = config.admin.console_token
    if not token:
        return console_off_routes()
    root = config.workspace_dir
    pages = [
        *SessionsPages(
            config=config,
            store=store,
            control=control,
            overview=partial(overview_row, metrics.recent_turns.figures, metrics.started_at),
        ).routes(),
        *MediaRoute(transcripts=store, files=media).routes(),
        *WorkspacePages(workspace, root).routes(),
        *MemoryPage(index=index, sessions=store, root=root).routes(),
        *CostsPage(config=config, store=store).routes(),
        *JobsPage(store=store, control=jobs, zone=ZoneInfo(config.agent.timezone)).routes(),
        *OperationsPages(
            pairings=store,
            pairing_channels=config.pairing_channels(),
            health=health,
            since=since,
            log=RECENT.newest_first,
            outbox=store,
            wake_sender=wake_sender,
            zone=ZoneInfo(config.agent.timezone),
            models=models,
            data=partial(data_use, config),
            reminders=store,
        ).routes(),
    ]
    auth = ConsoleAuth(token, store, config.server.trusted_proxies)
    return Console(auth, pages).routes()
