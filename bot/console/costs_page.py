"""The costs page: what the model calls cost per day of the last two weeks, stacked by kind
of work, this month's totals per kind, the people and chats that spent the most this month,
and where the bot's own sums stand against its caps. Everything is read from the store's
cost ledger (`bot/store/costs.py`), the same figures `krill costs` prints."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from zoneinfo import ZoneInfo

from aiohttp import web
from markupsafe import Markup

from bot.config import Config
from bot.console import charts
from bot.console.layout import count, join, money, page
from bot.console.stats import DAYS_SHOWN
from bot.spending.caps import ADJECTIVE, BOT_SCOPE, caps_for
from bot.spending.periods import PeriodKind, periods_of
from bot.spending.report import CostRow, cost_rows, day_series
from bot.store.costs import CostGroup, CostStore, SpendKey
from bot.types import Payer

TOP = 10  # rows of each table


class CostsPage:
    def __init__(
        self, *, config: Config, store: CostStore, clock: Callable[[], float] = time.time
    ) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.zone = ZoneInfo(config.agent.timezone)

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/admin/costs", self.costs)]

    def _days(self, now: float) -> list[str]:
        today = dt.datetime.fromtimestamp(now, self.zone).date()
        return [(today - dt.timedelta(days=n)).isoformat() for n in range(DAYS_SHOWN - 1, -1, -1)]

    async def costs(self, request: web.Request) -> web.Response:
        now = self.clock()
        days = self._days(now)
        month_start = days[-1][:8] + "01"
        per_day = await self.store.cost_totals(CostGroup.DAY, since_day=days[0])
        labels = [day[5:] for day in days]
        body = await self._caps(now) + Markup(
            '<section class="charts" data-testid="cost-chart">{}{}</section>'
        ).format(
            charts.stacked_bars(
                f"Cost per day by kind of work (last {DAYS_SHOWN} days)",
                labels,
                day_series(per_day, days),
                money,
            ),
            charts.stacked_bars(
                "Model calls per day by kind of work",
                labels,
                day_series(per_day, days, lambda total: total.calls),
                lambda n: count(int(n)),
            ),
        )
        for group, title in (
            (CostGroup.KIND, "This month by kind of work"),
            (CostGroup.PERSON, "People who spent the most this month"),
            (CostGroup.CHAT, "Chats that spent the most this month"),
        ):
            totals = await self.store.cost_totals(group, since_day=month_start)
            body += self._table(title, group.value.capitalize(), cost_rows(totals, group)[:TOP])
        return page("Costs", body, active="costs")

    async def _caps(self, now: float) -> Markup:
        """The whole bot's spending today and this month, against its caps where set."""
        periods = dict(zip(PeriodKind, periods_of(now, self.zone), strict=True))
        keys = {kind: SpendKey(BOT_SCOPE, period.key) for kind, period in periods.items()}
        uses = await self.store.spend_of(list(keys.values()), time.time())
        limits = {cap.period: cap.limit_usd for cap in caps_for(self.config, Payer("", "", ""))}
        cards = []
        for kind, key in keys.items():
            used, limit = uses[key].used_usd, limits.get(kind, 0.0)
            against = (
                Markup("the whole bot, of its {} cap of {} ({:.0%})").format(
                    ADJECTIVE[kind], money(limit), used / limit
                )
                if limit
                else Markup("the whole bot (no {} cap)").format(ADJECTIVE[kind])
            )
            cards.append(
                Markup('<div class="card"><h2>{}</h2><p class="big">{}</p><p>{}</p></div>').format(
                    "Today" if kind == PeriodKind.DAY else "This month", money(used), against
                )
            )
        return Markup('<div class="cards">{}</div>').format(join(cards))

    @staticmethod
    def _table(title: str, heading: str, rows: list[CostRow]) -> Markup:
        if not rows:
            return Markup("<h2>{}</h2><p>No model calls yet.</p>").format(title)
        body = join(
            Markup(
                '<tr data-testid="cost-row"><td>{}</td><td class="num">{}</td>'
                '<td class="num">{}</td></tr>'
            ).format(row.key, count(row.calls), money(row.cost_usd))
            for row in rows
        )
        return Markup(
            '<h2>{}</h2><table><thead><tr><th>{}</th><th class="num">Calls</th>'
            '<th class="num">Cost</th></tr></thead><tbody>{}</tbody></table>'
        ).format(title, heading, body)
