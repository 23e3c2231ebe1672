"""The aiohttp server every channel shares: health, metrics, and the channels' own routes."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping

from aiohttp import web

from bot.http_guard import browser_guard
from bot.metrics import Metrics

log = logging.getLogger(__name__)


def build_server(
    *,
    metrics: Metrics,
    ready: Callable[[], Mapping[str, bool | str]],
    routes: list[web.RouteDef],
    max_body_bytes: int,
    allowed_hosts: Collection[str] = (),
) -> web.Application:
    """`ready()` maps each enabled channel to whether it is up (or "standby": up, while
    another replica does its work); /healthz is 200 while all are, else 503 naming the
    channels that are down (not started yet, or stopped working).
    Browser-facing paths accept only loopback names and `allowed_hosts` in `Host`."""
    app = web.Application(
        client_max_size=max_body_bytes, middlewares=[browser_guard(allowed_hosts)]
    )

    async def healthz(request: web.Request) -> web.Response:
        channels = ready()
        if all(channels.values()):
            return web.json_response({"status": "ok", "channels": dict(channels)})
        down = sorted(name for name, up in channels.items() if not up)
        body = {"status": "down", "down": down, "channels": dict(channels)}
        return web.json_response(body, status=503)

    async def metrics_view(request: web.Request) -> web.Response:
        return web.Response(body=metrics.render(), content_type="text/plain", charset="utf-8")

    app.add_routes([web.get("/healthz", healthz), web.get("/metrics", metrics_view), *routes])
    return app


async def listen(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Serve `app` on `host:port` (0: any free port); returns the runner, whose `cleanup`
    stops it, and the port bound. Raises OSError when the port cannot be bound."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    sockets = getattr(site._server, "sockets", None) or []
    return runner, sockets[0].getsockname()[1] if sockets else port
