"""The pairings page (pending requests, approve or deny, through the same code as
`krill pairing`) and the health page (each channel as /healthz sees it, the outbox's
backlog and its dead chunks, each with a button that puts it back in line)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping

from aiohttp import web

from bot.console.layout import count, esc, notice, page, url, when
from bot.pairings import PAIRING_CHANNELS, decide_pairing, minutes_left, pending_pairings
from bot.store.base import OutboxStore, PairingStore
from bot.store.outbox_rows import DeadChunk


class OperationsPages:
    def __init__(
        self,
        *,
        pairings: PairingStore,
        health: Callable[[], Mapping[str, bool | str]],
        outbox: OutboxStore,
        wake_sender: Callable[[], None],
        zone: dt.tzinfo,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.pairings = pairings
        self.health = health
        self.outbox = outbox
        self.wake_sender = wake_sender
        self.zone = zone
        self.clock = clock

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/admin/pairings", self.pairings_page),
            web.post("/admin/pairings/decide", self.decide),
            web.get("/admin/health", self.health_page),
            web.post("/admin/outbox/retry", self.retry),
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
            # A string is a state that counts as up, e.g. "standby" for another replica's work.
            f"{esc(up) if isinstance(up, str) else 'up' if up else 'down'}</td></tr>"
            for name, up in sorted(channels.items())
        )
        overall = "ok" if all(channels.values()) else "down"
        said = request.query.get("said", "")
        body = (
            (notice(said) if said else "")
            + f'<p>/healthz says <b class="{"ok" if overall == "ok" else "bad"}">{overall}</b>.</p>'
            '<div class="table-wrap"><table><thead><tr><th>Channel</th><th>State</th></tr>'
            f"</thead><tbody>{rows}</tbody></table></div><h2>Outbox</h2>" + await self._outbox()
        )
        return page("Health", body, active="health")

    async def retry(self, request: web.Request) -> web.Response:
        form = await request.post()
        raw = str(form.get("row", ""))
        retried = raw.isdigit() and await self.outbox.outbox_retry_dead(int(raw), self.clock())
        if retried:
            self.wake_sender()
        said = (
            f"chunk {raw} is back in line to be sent"
            if retried
            else f"no dead chunk {raw} (it may have been retried already)"
        )
        raise web.HTTPSeeOther(url("/admin/health", said=said))

    async def _outbox(self) -> str:
        summary = await self.outbox.outbox_summary()
        dead = "".join(self._dead_row(c) for c in summary.dead_chunks)
        waiting = f"{count(summary.pending)} chunk(s) waiting, {count(summary.dead)} dead"
        return f"<p>{waiting}, {count(summary.maybe_sent)} maybe sent.</p>" + (
            f'<ul class="dead-chunks">{dead}</ul>' if dead else ""
        )

    def _dead_row(self, chunk: DeadChunk) -> str:
        return (
            f'<li class="card" data-testid="outbox-dead"><p><b>{esc(chunk.channel)}:'
            f"{esc(chunk.chat_id)}</b> part {chunk.chunk_index + 1} of {chunk.chunk_count}"
            f" of {esc(chunk.turn_id)} ({when(chunk.at, self.zone)})</p>"
            f"<p>{esc(chunk.reason)}</p>"
            '<form method="post" action="/admin/outbox/retry" class="inline">'
            f'<input type="hidden" name="row" value="{chunk.id}">'
            '<button data-testid="outbox-retry">Retry</button></form></li>'
        )
