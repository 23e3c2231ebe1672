"""The console's page shell and the small formatting helpers every page uses. Pages are
built as escaped HTML strings; only `esc` turns data into markup."""

from __future__ import annotations

import datetime as dt
from html import escape
from urllib.parse import urlencode

from aiohttp import web

# Only the console's own script and style; inline SVG charts need no more.
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
NAV = (
    ("sessions", "/admin", "Sessions"),
    ("workspace", "/admin/workspace", "Workspace"),
    ("memory", "/admin/memory", "Memory"),
    ("jobs", "/admin/jobs", "Jobs"),
    ("pairings", "/admin/pairings", "Pairings"),
    ("health", "/admin/health", "Health"),
)


def esc(value: object) -> str:
    return escape(str(value), quote=True)


def url(base: str, /, **params: str) -> str:
    query = urlencode({k: v for k, v in params.items() if v})
    return f"{base}?{query}" if query else base


def page(
    title: str, body: str, *, active: str = "", status: int = 200, nav: bool = True
) -> web.Response:
    links = "".join(
        f'<a href="{href}"{" class=active" if key == active else ""}>{label}</a>'
        for key, href, label in NAV
    )
    header = (
        f'<header><span class="brand">Krill console</span><nav>{links}</nav>'
        '<form method="post" action="/admin/logout"><button class="link">Log out</button>'
        "</form></header>"
        if nav
        else '<header><span class="brand">Krill console</span></header>'
    )
    html = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} · Krill</title>"
        '<link rel="stylesheet" href="/admin/static/console.css">'
        '<script src="/admin/static/console.js" defer></script></head>'
        f"<body>{header}<main><h1>{esc(title)}</h1>{body}</main></body></html>"
    )
    return web.Response(
        text=html,
        status=status,
        content_type="text/html",
        headers={"Content-Security-Policy": PAGE_POLICY, "Cache-Control": "no-store"},
    )


def notice(text: str, *, kind: str = "info") -> str:
    return f'<p class="notice {kind}" role="status">{esc(text)}</p>'


def when(timestamp: float | None, zone: dt.tzinfo) -> str:
    if not timestamp:
        return "—"
    return dt.datetime.fromtimestamp(timestamp, zone).strftime("%Y-%m-%d %H:%M")


def money(dollars: float) -> str:
    return f"${dollars:,.4f}" if dollars < 1 else f"${dollars:,.2f}"


def percent(ratio: float) -> str:
    return f"{ratio:.0%}"


def count(n: int) -> str:
    return f"{n:,}"
