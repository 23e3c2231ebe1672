"""The console's page shell and the small formatting helpers every page uses.

Pages are built as `Markup` (markupsafe): literal markup with data filled in through
`Markup.format`, `+` and `join`, which escape every plain string. A page's body must be
`Markup`, so data can only reach it escaped: no call to remember, none to forget."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from urllib.parse import urlencode

from aiohttp import web
from markupsafe import Markup

# Only the console's own script and style; inline SVG charts need no more.
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
NAV = (
    ("sessions", "/admin", "Sessions"),
    ("workspace", "/admin/workspace", "Workspace"),
    ("memory", "/admin/memory", "Memory"),
    ("costs", "/admin/costs", "Costs"),
    ("jobs", "/admin/jobs", "Jobs"),
    ("pairings", "/admin/pairings", "Pairings"),
    ("reminders", "/admin/reminders", "Reminders"),
    ("health", "/admin/health", "Health"),
)


def join(parts: Iterable[Markup | str]) -> Markup:
    """The parts one after another (plain strings escaped)."""
    return Markup("").join(parts)


def url(base: str, /, **params: str) -> str:
    query = urlencode({k: v for k, v in params.items() if v})
    return f"{base}?{query}" if query else base


def page(
    title: str, body: Markup, *, active: str = "", status: int = 200, nav: bool = True
) -> web.Response:
    links = join(
        Markup('<a href="{}"{}>{}</a>').format(
            href, Markup(" class=active") if key == active else "", label
        )
        for key, href, label in NAV
    )
    header = (
        Markup(
            '<header><span class="brand">Krill console</span><nav>{}</nav>'
            '<form method="post" action="/admin/logout"><button class="link">Log out</button>'
            "</form></header>"
        ).format(links)
        if nav
        else Markup('<header><span class="brand">Krill console</span></header>')
    )
    html = Markup(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>{title} · Krill</title>"
        '<link rel="stylesheet" href="/admin/static/console.css">'
        '<script src="/admin/static/console.js" defer></script></head>'
        "<body>{header}<main><h1>{title}</h1>{body}</main></body></html>"
    ).format(title=title, header=header, body=body)
    return web.Response(
        text=str(html),
        status=status,
        content_type="text/html",
        headers={"Content-Security-Policy": PAGE_POLICY, "Cache-Control": "no-store"},
    )


def notice(text: str, *, kind: str = "info") -> Markup:
    return Markup('<p class="notice {}" role="status">{}</p>').format(kind, text)


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
