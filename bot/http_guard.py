"""The DNS-rebinding guard for the pages and APIs a browser uses: the web chat and /admin.

A page on another site can point its own host name at 127.0.0.1 and then talk to Krill as a
"same-origin" page, so the browser's own checks do not help. What it cannot change is the
`Host` header, which still names the attacker's domain: only loopback names and
`server.allowed_hosts` are accepted there, and an `Origin`, when sent, must name the same
host. Webhooks, /healthz and /metrics are called by servers, not browsers, and are exempt.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

# Paths a browser uses; everything else on the server is for other servers.
BROWSER_PATHS = ("/api/", "/ws/", "/admin")
LOOPBACK_NAMES = frozenset({"localhost"})


def split_host(value: str) -> tuple[str, str]:
    """(host name, port) of a Host header or URL netloc, lower-cased; "" for no port.

    IPv6 literals keep no brackets: "[::1]:8787" -> ("::1", "8787").
    """
    value = value.strip().lower()
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        return host, rest.removeprefix(":")
    host, _, port = value.partition(":")
    return host, port


def is_loopback_host(host: str) -> bool:
    """True for `localhost` and loopback IP literals (127.0.0.0/8, ::1), without a port."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_accepted(value: str, allowed_hosts: Collection[str]) -> bool:
    """Whether a `Host` value names this server: a loopback name with any port, or an entry
    of `allowed_hosts` ("chat.example.com" allows any port, "chat.example.com:8443" one)."""
    host, port = split_host(value)
    if not host:
        return False
    if is_loopback_host(host):
        return True
    for entry in allowed_hosts:
        want_host, want_port = split_host(entry)
        if want_host == host and (not want_port or want_port == port):
            return True
    return False


def browser_refusal(host: str | None, origin: str | None, allowed_hosts: Collection[str]) -> str:
    """Why a browser-facing request must be refused, or "" when it may proceed."""
    if not host or not host_accepted(host, allowed_hosts):
        return "this host name is not accepted here (add it to server.allowed_hosts)"
    if origin is not None and urlsplit(origin).netloc.lower() != host.strip().lower():
        return "cross-origin requests are not allowed"
    return ""


def is_browser_path(path: str) -> bool:
    return path == "/" or path.startswith(BROWSER_PATHS)


def browser_guard(allowed_hosts: Collection[str]) -> Middleware:
    """aiohttp middleware applying `browser_refusal` to the browser paths (403 on refusal)."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if is_browser_path(request.path):
            refusal = browser_refusal(
                request.headers.get("Host"), request.headers.get("Origin"), allowed_hosts
            )
            if refusal:
                return web.json_response({"error": refusal}, status=403)
        return await handler(request)

    return guard
