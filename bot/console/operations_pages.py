"""The pairings page (pending requests, approve or deny, through the same code as
`krill pairing`) and the health page (each channel as /healthz sees it, and the outbox once
a provider for it is connected)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from aiohttp import web

from bot.console.layout import count, esc, notice, page, url, when
from bot.pairings import PAIRING_CHANNELS, decide_pairing, minutes_left, pending_pairings
from bot.store.base import PairingStore


@dataclass(frozen=True, slots=True)
class DeadChunk:
    session_key: str
    reason: str
    at: float


@dataclass(frozen=True, slots=True)
class OutboxSummary:
    pending: int
    dead: int
    dead_chunks: list[DeadChunk] = field(default_factory=list)


class OutboxView(Protocol):
    """What the health page shows of the outbox; connected once the outbox exists."""

    async def outbox_summary(self) -> OutboxSummary: ...


class OperationsPages:
    def __init__(
        self,
        *,
        pairings: PairingStore,
        health: Callable[[], dict[str, bool]],
        outbox: OutboxView | None = None,
        zone: dt.tzinfo,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.pairings = pairings
        self.health = health
        self.outbox = outbox
        self.zone = zone
        self.clock = clock

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/admin/pairings", self.pairings_page),
            web.post("/admin/pairings/decide", self.decide),
            web.get("/admin/health", self.health_page),
        ]

    async def pairings_page(self, request: web.Request) -> web.Response:
        now = self.clock()
        pending = await pending_pairings(self.pairings, PAIRING_CHANNELS, now)
        said = request.query.get("said", "")
        cards = "".join(
            f'<li class="card" data-testid="pairing-row"><p><b>{esc(p.channel)}:'
            f"{esc(p.user_id)}</b> {esc(p.user_name)}</p><p>code <code>{esc(p.code)}</code> · "
            f"expires in {minutes_left(p, now)} min</p>"
            '<form method="post" action="/admin/pairings/decide" class="inline">'
            f'<input type="hidden" name="channel" value="{esc(p.channel)}">'
            f'<input type="hidden" name="code" value="{esc(p.code)}">'
            '<button name="decision" value="approve" data-testid="pairing-approve">Approve'
            '</button><button name="decision" value="deny" class="secondary">Deny</button>'
            "</form></li>"
            for p in pending
        )
        table = (
            f'<ul class="pairings">{cards}</ul>'
            if pending
            else "<p>No pending pairing requests.</p>"
        )
        return page("Pairings", (notice(said) if said else "") + table, active="pairings")

    async def decide(self, request: web.Request) -> web.Response:
        form = await request.post()
        channel, code = str(form.get("channel", "")), str(form.get("code", ""))
        approve = form.get("decision") == "approve"
        match = await decide_pairing(
            self.pairings, channel, code, approve=approve, now=self.clock()
        )
        said = (
            f"{match.status} {match.channel}:{match.user_id} {match.user_name}".rstrip()
            if match
            else f"no pending request with code {code} on {channel} (it may have expired)"
        )
        raise web.HTTPSeeOther(url("/admin/pairings", said=said))

    async def health_page(self, request: web.Request) -> web.Response:
        channels = self.health()
        rows = "".join(
            f'<tr><td>{esc(name)}</td><td class="{"ok" if up else "bad"}">'
            f"{'up' if up else 'down'}</td></tr>"
            for name, up in sorted(channels.items())
        )
        overall = "ok" if all(channels.values()) else "down"
        body = (
            f'<p>/healthz says <b class="{"ok" if overall == "ok" else "bad"}">{overall}</b>.</p>'
            '<div class="table-wrap"><table><thead><tr><th>Channel</th><th>State</th></tr>'
            f"</thead><tbody>{rows}</tbody></table></div><h2>Outbox</h2>" + await self._outbox()
        )
        return page("Health", body, active="health")

    async def _outbox(self) -> str:
        if self.outbox is None:
            return "<p>The outbox is not connected to the console in this build.</p>"
        summary = await self.outbox.outbox_summary()
        dead = "".join(
            f"<li>{esc(c.session_key)}: {esc(c.reason)} ({when(c.at, self.zone)})</li>"
            for c in summary.dead_chunks
        )
        return f"<p>{count(summary.pending)} chunk(s) waiting, {count(summary.dead)} dead.</p>" + (
            f"<ul>{dead}</ul>" if dead else ""
        )
