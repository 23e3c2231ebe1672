"""The pairings page (pending requests, approve or deny, through the same code as
`krill pairing`), the reminders page (every pending reminder, as `krill reminders list`
shows them) and the health page (each channel as /healthz sees it, since when, and the
last warning or error its code logged, each model's calls,
failures, fallbacks and cool-down, the outbox's backlog and its dead chunks, each with a
button that puts it back in line, how big the data folder is by kind, and the last
warnings and errors this process logged)."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web
from markupsafe import Markup

from bot.agent.model import ModelHealth
from bot.console.layout import count, join, notice, page, url, when
from bot.log_tail import LogEntry, last_from
from bot.media.prepare import human_size
from bot.media.usage import DiskUse
from bot.pairings import decide_pairing, minutes_left, pending_pairings
from bot.store.base import OutboxStore, PairingStore, ReminderStatus, ReminderStore
from bot.store.outbox_rows import DeadChunk

# This process's figures per model (`ModelClient.health`).
ModelFigures = Callable[[], Awaitable[list[ModelHealth]]]


class OperationsPages:
    def __init__(
        self,
        *,
        pairings: PairingStore,
        pairing_channels: list[str],
        health: Callable[[], Mapping[str, bool | str]],
        since: Callable[[], Mapping[str, float]],
        log: Callable[[], list[LogEntry]],
        outbox: OutboxStore,
        wake_sender: Callable[[], None],
        zone: dt.tzinfo,
        models: ModelFigures,
        data: Callable[[], list[DiskUse]],
        reminders: ReminderStore,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.models = models
        self.data = data
        self.reminders = reminders
        self.pairings = pairings
        self.pairing_channels = pairing_channels
        self.health = health
        self.since = since
        self.log = log
        self.outbox = outbox
        self.wake_sender = wake_sender
        self.zone = zone
        self.clock = clock

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/admin/pairings", self.pairings_page),
            web.post("/admin/pairings/decide", self.decide),
            web.get("/admin/reminders", self.reminders_page),
            web.get("/admin/health", self.health_page),
            web.post("/admin/outbox/retry", self.retry),
        ]

    async def pairings_page(self, request: web.Request) -> web.Response:
        now = self.clock()
        pending = await pending_pairings(self.pairings, self.pairing_channels, now)
        said = request.query.get("said", "")
        cards = join(
            Markup(
                '<li class="card" data-testid="pairing-row"><p><b>{channel}:{user_id}</b> '
                "{user_name}</p><p>code <code>{code}</code> · expires in {minutes} min</p>"
                '<form method="post" action="/admin/pairings/decide" class="inline">'
                '<input type="hidden" name="channel" value="{channel}">'
                '<input type="hidden" name="code" value="{code}">'
                '<button name="decision" value="approve" data-testid="pairing-approve">Approve'
                '</button><button name="decision" value="deny" class="secondary">Deny</button>'
                "</form></li>"
            ).format(
                channel=p.channel,
                user_id=p.user_id,
                user_name=p.user_name,
                code=p.code,
                minutes=minutes_left(p, now),
            )
            for p in pending
        )
        table = (
            Markup('<ul class="pairings">{}</ul>').format(cards)
            if pending
            else Markup("<p>No pending pairing requests.</p>")
        )
        return page("Pairings", (notice(said) if said else Markup("")) + table, active="pairings")

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

    async def reminders_page(self, request: web.Request) -> web.Response:
        pending = await self.reminders.reminders(status=ReminderStatus.PENDING)
        rows = join(
            Markup(
                '<tr data-testid="reminder-row"><td>{}</td><td>{}</td><td>{}</td><td>{}</td>'
                '<td class="key">{}</td></tr>'
            ).format(r.id, r.text, when(r.due_at, self.zone), r.creator, r.session_key)
            for r in pending
        )
        body = (
            Markup(
                '<div class="table-wrap"><table><thead><tr><th>#</th><th>Text</th><th>Due'
                "</th><th>Set by</th><th>Session</th></tr></thead><tbody>{}</tbody></table></div>"
            ).format(rows)
            if pending
            else Markup("<p>No pending reminders.</p>")
        )
        return page("Reminders", body, active="reminders")

    async def health_page(self, request: web.Request) -> web.Response:
        channels = self.health()
        since, entries = self.since(), self.log()
        rows = join(
            Markup(
                '<tr data-testid="channel-row"><td>{}</td><td class="{}">{}</td>'
                '<td data-testid="channel-since">{}</td><td data-testid="channel-error">{}</td>'
                "</tr>"
            ).format(
                name,
                "ok" if up else "bad",
                # A string is a state that counts as up, e.g. "standby" for another
                # replica's work.
                up if isinstance(up, str) else "up" if up else "down",
                when(since[name], self.zone) if name in since else "",
                self._problem(last_from(entries, f"channels.{name}")),
            )
            for name, up in sorted(channels.items())
        )
        overall = "ok" if all(channels.values()) else "down"
        said = request.query.get("said", "")
        body = Markup(
            '{}<p>/healthz says <b class="{}">{}</b>.</p>'
            '<div class="table-wrap"><table><thead><tr><th>Channel</th><th>State</th>'
            "<th>Since</th><th>Last warning or error</th></tr></thead><tbody>{}</tbody></table>"
            "</div>{}<h2>Outbox</h2>{}<h2>Data</h2>{}{}"
        ).format(
            notice(said) if said else "",
            "ok" if overall == "ok" else "bad",
            overall,
            rows,
            await self._models(),
            await self._outbox(),
            await self._data(),
            self._log(entries),
        )
        return page("Health", body, active="health")

    def _problem(self, entry: LogEntry | None) -> Markup:
        if entry is None:
            return Markup("")
        return Markup("{} ({})").format(entry.message, when(entry.at, self.zone))

    def _log(self, entries: list[LogEntry]) -> Markup:
        rows = join(
            Markup(
                '<tr data-testid="log-row"><td>{}</td><td class="bad">{}</td>'
                "<td><pre>{}</pre></td><td>{}</td></tr>"
            ).format(when(e.at, self.zone), e.level, e.message, e.logger)
            for e in entries
        )
        return Markup(
            "<h2>Log</h2><p>The last warnings and errors since this process started, newest "
            "first, as the log shows them.</p>{}"
        ).format(
            Markup(
                '<div class="table-wrap"><table><thead><tr><th>When</th><th>Level</th>'
                "<th>Message</th><th>Logger</th></tr></thead><tbody>{}</tbody></table></div>"
            ).format(rows)
            if entries
            else Markup("<p>None.</p>")
        )

    async def _data(self) -> Markup:
        uses = await asyncio.to_thread(self.data)  # walks folders: off the event loop
        rows = join(
            Markup(
                '<tr data-testid="data-row"><td>{}</td><td>{}</td><td><code>{}</code></td></tr>'
            ).format(use.label, human_size(use.size), use.path)
            for use in uses
        )
        return Markup(
            '<div class="table-wrap"><table><thead><tr><th>Kind</th><th>Size</th>'
            "<th>Where</th></tr></thead><tbody>{}</tbody></table></div>"
        ).format(rows)

    async def _models(self) -> Markup:
        rows = join(
            Markup(
                '<tr data-testid="model-row"><td>{}</td><td>{}</td><td>{}</td><td>{}</td>'
                '<td>{}</td><td class="{}">{}</td></tr>'
            ).format(
                m.provider,
                m.model,
                count(m.calls),
                count(m.failures),
                count(m.fallbacks),
                "bad" if m.cooling else "ok",
                f"skipped: {m.cooling}" if m.cooling else "in use",
            )
            for m in await self.models()
        )
        return Markup(
            "<h2>Models</h2><p>Since this process started; a model that failed is skipped "
            "for agent.fallback_cooldown_seconds.</p>"
            '<div class="table-wrap"><table><thead><tr><th>Provider</th><th>Model</th>'
            "<th>Calls</th><th>Failures</th><th>Fallbacks</th><th>State</th></tr></thead>"
            "<tbody>{}</tbody></table></div>"
        ).format(rows)

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

    async def _outbox(self) -> Markup:
        summary = await self.outbox.outbox_summary()
        dead = join(self._dead_row(c) for c in summary.dead_chunks)
        return Markup("<p>{} chunk(s) waiting, {} dead, {} maybe sent.</p>{}").format(
            count(summary.pending),
            count(summary.dead),
            count(summary.maybe_sent),
            Markup('<ul class="dead-chunks">{}</ul>').format(dead) if dead else "",
        )

    def _dead_row(self, chunk: DeadChunk) -> Markup:
        return Markup(
            '<li class="card" data-testid="outbox-dead"><p><b>{}:{}</b> part {} of {} of {} '
            "({})</p><p>{}</p>"
            '<form method="post" action="/admin/outbox/retry" class="inline">'
            '<input type="hidden" name="row" value="{}">'
            '<button data-testid="outbox-retry">Retry</button></form></li>'
        ).format(
            chunk.channel,
            chunk.chat_id,
            chunk.chunk_index + 1,
            chunk.chunk_count,
            chunk.turn_id,
            when(chunk.at, self.zone),
            chunk.reason,
            chunk.id,
        )
