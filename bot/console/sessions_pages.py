"""The sessions pages: every current session with its counters (sortable, filtered by
channel and text) under the overview row, the day charts and totals, and one session with
its transcript, its calls as charts, reset and compact buttons and a JSONL export."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from zoneinfo import ZoneInfo

from aiohttp import web
from markupsafe import Markup

from bot.agent.pricing import PriceList
from bot.config import Config
from bot.console import charts, stats
from bot.console.layout import count, join, money, notice, page, percent, url, when
from bot.console.transcript_view import render_entries
from bot.sessions.breaker import is_paused
from bot.sessions.window import session_limits
from bot.store.base import SessionRow, SessionStore, TranscriptStore, UsageStore
from bot.store.costs import CostGroup, CostStore
from bot.store.names import NameStore, name_of_session
from bot.transcript_export import entry_record


class SessionControl(Protocol):
    """Reset and compaction, queued behind the work in the session's lane."""

    async def reset_in_lane(self, key: str, *, reason: str) -> str: ...
    async def compact_in_lane(self, key: str, focus: str = "") -> str: ...


class ConsoleStore(SessionStore, TranscriptStore, UsageStore, CostStore, NameStore, Protocol):
    """What the sessions pages read."""


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    label: str
    value: Callable[[SessionRow], float | str]


def _tokens(s: SessionRow) -> int:
    """Everything the model read (cached or not) and wrote."""
    return s.input_tokens + s.cache_read_tokens + s.cache_write_tokens + s.output_tokens


def _context(window: int) -> Callable[[SessionRow], float]:
    return lambda s: s.context_tokens / window if window else 0.0


def columns(window: int) -> list[Column]:
    return [
        Column("key", "Session key", lambda s: s.session_key),
        Column("channel", "Channel", lambda s: s.channel),
        Column("type", "Chat", lambda s: str(s.chat_type or "")),
        Column("activity", "Last activity", lambda s: s.last_activity_at or s.updated_at),
        Column("turns", "Turns", lambda s: s.turns),
        Column("tokens", "Tokens", _tokens),
        Column("cost", "Cost", lambda s: s.cost_usd),
        Column("cache", "Cache hit", lambda s: s.cache_hit_ratio),
        Column("context", "Context", _context(window)),
        Column("compactions", "Compactions", lambda s: s.compaction_count),
        Column("flush", "Last flush", lambda s: s.memory_flush_at or 0.0),
    ]


class SessionsPages:
    def __init__(
        self,
        *,
        config: Config,
        store: ConsoleStore,
        control: SessionControl,
        overview: Callable[[], Markup],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.overview = overview
        self.store = store
        self.control = control
        self.clock = clock
        self.zone = ZoneInfo(config.agent.timezone)
        self.config = config
        self.window = config.agent.context_window
        self.prices = PriceList.of(config)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/admin", self.index),
            web.get("/admin/session", self.session),
            web.get("/admin/session/export", self.export),
            web.post("/admin/session/reset", self.reset),
            web.post("/admin/session/compact", self.compact),
        ]

    # --- the list ---------------------------------------------------------------------------

    async def index(self, request: web.Request) -> web.Response:
        now = self.clock()
        days = stats.daily(
            await self.store.usage_since(stats.first_day(now, self.zone)),
            now=now,
            zone=self.zone,
            prices=self.prices,
        )
        sessions = await self.store.list_sessions(current_only=True)
        known = await self.store.names_all()
        names = {s.session_key: name_of_session(known, s.origin) for s in sessions}
        channel = request.query.get("channel", "")
        text = request.query.get("q", "").strip().lower()
        shown = [
            s
            for s in sessions
            if (not channel or s.channel == channel)
            and (not text or text in s.session_key or text in names[s.session_key].lower())
        ]
        cols = columns(self.window)
        sort = request.query.get("sort", "activity")
        descending = request.query.get("dir", "desc") != "asc"
        by = next((c for c in cols if c.key == sort), cols[3])
        shown.sort(key=by.value, reverse=descending)
        body = (
            self.overview()
            + self._totals(days)
            + self._charts(days)
            + self._filter(sorted({s.channel for s in sessions}), channel, text)
            + self._table(shown, names, cols, by.key, descending, channel, text)
        )
        return page("Sessions", body, active="sessions")

    def _totals(self, days: list[stats.DayUsage]) -> Markup:
        cards = []
        for label, total in (
            ("Today", stats.totals(days, 1)),
            ("Last 7 days", stats.totals(days, stats.WEEK_DAYS)),
        ):
            cards.append(
                Markup(
                    '<div class="card" data-testid="total"><h2>{}</h2><p class="big">{}</p>'
                    "<p>{} model calls · {} tokens · cache hit {}</p></div>"
                ).format(
                    label,
                    money(total.cost),
                    count(total.calls),
                    count(total.usage.prompt_tokens + total.usage.output_tokens),
                    percent(stats.hit_ratio(total.usage)),
                )
            )
        return Markup('<section class="cards">{}</section>').format(join(cards))

    def _charts(self, days: list[stats.DayUsage]) -> Markup:
        labels = [d.day.strftime("%m-%d") for d in days]
        ratios = [stats.hit_ratio(d.usage) if d.calls else None for d in days]
        return Markup('<section class="charts">{}{}{}</section>').format(
            charts.stacked_bars("Cost per day by channel", labels, stats.cost_series(days), money),
            charts.line("Cache hit ratio per day", labels, ratios, percent),
            charts.stacked_bars("Tokens per day by kind", labels, stats.token_series(days), _short),
        )

    def _filter(self, channels: list[str], channel: str, text: str) -> Markup:
        options = Markup('<option value="">all channels</option>') + join(
            Markup("<option{}>{}</option>").format(Markup(" selected") if c == channel else "", c)
            for c in channels
        )
        return Markup(
            '<form class="filter" method="get" action="/admin">'
            '<select name="channel" aria-label="channel">{}</select>'
            '<input name="q" value="{}" placeholder="filter by key or name" '
            'aria-label="filter by key or name"><button>Filter</button></form>'
        ).format(options, text)

    def _table(
        self,
        sessions: list[SessionRow],
        names: dict[str, str],
        cols: list[Column],
        sort: str,
        descending: bool,
        channel: str,
        text: str,
    ) -> Markup:
        heads = []
        for c in cols:
            flip = "asc" if c.key == sort and descending else "desc"
            arrow = (" ▼" if descending else " ▲") if c.key == sort else ""
            link = url("/admin", sort=c.key, dir=flip, channel=channel, q=text)
            heads.append(Markup('<th><a href="{}">{}{}</a></th>').format(link, c.label, arrow))
        rows = join(self._row(s, names[s.session_key]) for s in sessions)
        if not sessions:
            rows = Markup('<tr><td colspan="{}">No sessions match.</td></tr>').format(len(cols))
        return Markup(
            '<div class="table-wrap"><table class="sessions"><thead><tr>{}</tr></thead>'
            "<tbody>{}</tbody></table></div>"
        ).format(join(heads), rows)

    def _row(self, s: SessionRow, name: str) -> Markup:
        context = s.context_tokens / self.window if self.window else 0.0
        flush = when(s.memory_flush_at, self.zone)
        if s.memory_flush_error:
            flush += " (failed)"
        cells = [
            Markup('<a href="{}" data-testid="session-link">{}</a>{}').format(
                url("/admin/session", key=s.session_key), s.session_key, _name(name)
            ),
            s.channel,
            s.chat_type or "—",
            when(s.last_activity_at or s.updated_at, self.zone),
            count(s.turns),
            count(_tokens(s)),
            Markup('<span data-testid="session-cost">{}</span>').format(money(s.cost_usd)),
            percent(s.cache_hit_ratio),
            f"{_short(s.context_tokens)} / {_short(self.window)} ({percent(context)})",
            count(s.compaction_count),
            flush,
        ]
        tds = join(Markup("<td>{}</td>").format(cell) for cell in cells)
        return Markup('<tr data-testid="session-row" data-key="{}">{}</tr>').format(
            s.session_key, tds
        )

    # --- one session ------------------------------------------------------------------------

    async def _sessions_of(self, request: web.Request) -> tuple[str, list[SessionRow]]:
        key = request.query.get("key", "").strip().lower()
        found = await self.store.sessions_for_key(key) if key else []
        if not found:
            raise web.HTTPNotFound(text=f"no session with key {key!r}")
        return key, found

    def _breaker(self, session: SessionRow) -> str:
        """The compaction breaker: working, failing, or paused until when."""
        failures, until = session.compaction_failures, session.compaction_paused_until
        if is_paused(until, self.clock()):
            return f"paused until {when(until or 0, self.zone)} after {failures} failures in a row"
        return f"{failures} failure(s) in a row" if failures else "working"

    async def session(self, request: web.Request) -> web.Response:
        key, sessions = await self._sessions_of(request)
        wanted = request.query.get("id", "")
        current = next((s for s in sessions if s.session_id == wanted), None)
        current = current or next((s for s in sessions if s.is_current), sessions[-1])
        entries = await self.store.transcript(current.session_id)
        calls = stats.session_calls(entries, model=current.model, prices=self.prices)
        kinds = await self.store.cost_totals(CostGroup.KIND, session_id=current.session_id)
        split = " · ".join(f"{t.kind} {money(t.cost_usd)}" for t in kinds) or "—"
        labels = [when(c.at, self.zone)[5:] for c in calls]
        said = request.query.get("said", "")
        others = join(
            Markup('<li><a href="{}">{}</a> {}{}</li>').format(
                url("/admin/session", key=key, id=s.session_id),
                s.session_id,
                when(s.created_at, self.zone),
                " (current)" if s.is_current else "",
            )
            for s in sessions
            if s.session_id != current.session_id
        )
        facts = Markup(
            "<dl class=facts><dt>Session</dt><dd>{}{}</dd>"
            "<dt>Model</dt><dd>{}</dd>"
            "<dt>Turns</dt><dd>{}</dd>"
            '<dt>Cost</dt><dd data-testid="session-cost">{}</dd>'
            '<dt>By kind of work</dt><dd data-testid="session-costs">{}</dd>'
            "<dt>Cache hit</dt><dd>{}</dd>"
            "<dt>Context</dt><dd>{} / {}</dd>"
            "<dt>Compactions</dt><dd>{}</dd>"
            '<dt>Compaction</dt><dd data-testid="compaction-breaker">{}</dd></dl>'
        ).format(
            current.session_id,
            " (current)" if current.is_current else " (old)",
            current.model or "—",
            count(current.turns),
            money(current.cost_usd),
            split,
            percent(current.cache_hit_ratio),
            count(current.context_tokens),
            count(session_limits(self.config, current).window),
            count(current.compaction_count),
            self._breaker(current),
        )
        actions = Markup(
            '<div class="actions">{}{}<a class="button" href="{}">Export JSONL</a></div>'
        ).format(
            _action("/admin/session/compact", key, "Compact now", "Compact this session now?"),
            _action(
                "/admin/session/reset", key, "Reset", "Start a fresh session? The old one is kept."
            ),
            url("/admin/session/export", key=key),
        )
        name = name_of_session(await self.store.names_all(), current.origin)
        body = Markup(
            '<p class="key">{key}</p>{name}{said}{facts}{actions}<section class="charts">'
            "{cost}{hits}</section>{others}<h2>Transcript</h2>{transcript}"
        ).format(
            key=key,
            name=Markup('<p class="name" data-testid="session-name">{}</p>').format(name)
            if name
            else "",
            said=notice(said) if said else "",
            facts=facts,
            actions=actions,
            cost=charts.stacked_bars(
                "Cost per call", labels, {"cost": [c.cost for c in calls]}, money
            ),
            hits=charts.line("Cache hit per call", labels, [c.cache_hit for c in calls], percent),
            others=Markup(
                "<details><summary>Other sessions of this key</summary><ul>{}</ul></details>"
            ).format(others)
            if others
            else "",
            transcript=render_entries(entries, self.zone),
        )
        return page("Session", body, active="sessions")

    async def export(self, request: web.Request) -> web.Response:
        key, sessions = await self._sessions_of(request)
        lines = [
            json.dumps(entry_record(entry), ensure_ascii=False)
            for s in sessions
            for entry in await self.store.transcript(s.session_id)
        ]
        name = key.replace(":", "_")
        return web.Response(
            text="".join(f"{line}\n" for line in lines),
            content_type="application/x-ndjson",
            headers={"Content-Disposition": f'attachment; filename="{name}.jsonl"'},
        )

    async def _posted_key(self, request: web.Request) -> str:
        """The current session key a form names; 404 for one with no session."""
        key = str((await request.post()).get("key", "")).strip().lower()
        if not key or await self.store.current_session(key) is None:
            raise web.HTTPNotFound(text=f"no session with key {key!r}")
        return key

    async def reset(self, request: web.Request) -> web.Response:
        key = await self._posted_key(request)
        said = await self.control.reset_in_lane(key, reason="console reset")
        raise web.HTTPSeeOther(url("/admin/session", key=key, said=said))

    async def compact(self, request: web.Request) -> web.Response:
        key = await self._posted_key(request)
        said = await self.control.compact_in_lane(key)
        raise web.HTTPSeeOther(url("/admin/session", key=key, said=said))


def _action(path: str, key: str, label: str, question: str) -> Markup:
    return Markup(
        '<form method="post" action="{}" data-confirm="{}">'
        '<input type="hidden" name="key" value="{}"><button>{}</button></form>'
    ).format(path, question, key, label)


def _short(n: float) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 1000:
        return f"{n / 1000:.0f}k"
    return f"{n:.0f}"


def _name(name: str) -> Markup:
    """A person's or chat's name beside a session key (nothing when none was seen)."""
    if not name:
        return Markup()
    return Markup('<span class="name" data-testid="session-name">{}</span>').format(name)
