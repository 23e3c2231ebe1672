"""Spending caps at work, over the store's sums (bot/store/costs.py).

Before a person's turn (`admit`): the messages of a sender over one of their caps are not
answered, and the sender is told once per period which cap, when it resets and whom to ask;
the rest of the turn takes a hold on its capped sums, waiting while it is near a cap with
other turns running. After the turn (`settle`) the hold is let go and whoever should hear of
a cap passing `budgets.warn_at` (or, for the bot's and a chat's caps, being reached) hears
it once per period: the person of their own cap, the admins (by direct message on the
channels this process runs, and in the log) of the bot's and a chat's. Background work asks
`blocked` first and waits while its session's caps are reached. `/status` reads
`status_lines`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol
from zoneinfo import ZoneInfo

from bot.spending.caps import (
    Cap,
    ScopeKind,
    caps_for,
    exempt,
    over_cap_text,
    payer_for,
    reached_text,
    usd,
    warning_text,
)
from bot.spending.periods import Period, PeriodKind, periods_of
from bot.store.budgets import BudgetName
from bot.store.costs import CapUse, CostGroup, CostStore, Hold, SpendKey
from bot.store.inbound import InboundStatus, InboundStore
from bot.store.shared_state import SharedStateStore
from bot.types import Address, InboundMessage, Payer, SessionOrigin

if TYPE_CHECKING:
    from bot.config import Config
    from bot.store.sessions import SessionRow

log = logging.getLogger(__name__)

HOLD_POLL_SECONDS = 0.5  # a turn waiting near a cap looks again this often


class Notices(Protocol):
    """Where notes go (`bot.gateway.replies.Replies`): queued for a chat, and the channels
    this process runs, on which admins are told by direct message."""

    @property
    def channels(self) -> Container[str]: ...

    async def send_text(self, address: Address, text: str) -> object: ...


class GuardStore(CostStore, SharedStateStore, InboundStore, Protocol):
    """The sums and holds, the once-a-period notes (as budgets), and inbound rows."""


class TurnWork(Protocol):
    """The parts of a turn the guard reads and trims (`bot.agent.runner.TurnJob`)."""

    session_key: str
    turn_id: str
    messages: list[InboundMessage]
    inbound_ids: list[int]
    resume: bool


@dataclass(frozen=True, slots=True)
class CapState:
    """A cap, its current period and where its sum stands."""

    cap: Cap
    period: Period
    use: CapUse

    @property
    def used(self) -> float:
        return self.use.used_usd

    @property
    def share(self) -> float:
        return self.use.used_usd / self.cap.limit_usd


def _latest(states: list[CapState]) -> CapState:
    """Of caps that stop a turn, the one it waits longest for (then the most personal)."""
    rank = {ScopeKind.PERSON: 2, ScopeKind.CHAT: 1, ScopeKind.BOT: 0}
    return max(states, key=lambda s: (s.period.ends_at, rank[s.cap.scope.kind]))


class SpendingGuard:
    def __init__(
        self,
        *,
        config: Config,
        store: GuardStore,
        replies: Notices,
        holder: str,
        clock: Callable[[], float],
    ) -> None:
        self.config = config
        self.store = store
        self.replies = replies
        self.holder = holder  # this process's name on the session leases its holds live by
        self.clock = clock  # the service's clock, which days and months turn over on
        self.zone = ZoneInfo(config.agent.timezone)

    # --- where sums stand -------------------------------------------------------------------

    async def states(self, payer: Payer, caps: list[Cap] | None = None) -> list[CapState]:
        """Every cap of `payer` (or `caps`) with its period now and its sum."""
        caps = caps_for(self.config, payer) if caps is None else caps
        if not caps:
            return []
        day, month = periods_of(self.clock(), self.zone)
        periods = {PeriodKind.DAY: day, PeriodKind.MONTH: month}
        keys = [SpendKey(cap.scope.name, periods[cap.period].key) for cap in caps]
        uses = await self.store.spend_of(keys, time.time())
        return [
            CapState(cap, periods[cap.period], uses[key])
            for cap, key in zip(caps, keys, strict=True)
        ]

    async def _over(self, payer: Payer) -> CapState | None:
        """The cap that stops `payer` now, if any (None for the exempt)."""
        if exempt(self.config, payer):
            return None
        over = [s for s in await self.states(payer) if s.used >= s.cap.limit_usd]
        return _latest(over) if over else None

    def _payer(self, work: TurnWork, msg: InboundMessage) -> Payer:
        return payer_for(
            self.config,
            session_id="",
            origin=SessionOrigin.of(msg),
            principal=msg.principal,
            turn_id=work.turn_id,
        )

    # --- a person's turn ------------------------------------------------------------------

    async def admit(self, work: TurnWork) -> bool:
        """Whether `work` may run, after taking out the messages of senders over a cap
        (they are told once per period; their rows are finished as capped) and taking the
        hold of the first sender left. A resumed turn goes on whatever the caps say."""
        if work.resume or not work.messages:
            return True
        waiting = False
        while True:
            if not await self._drop_capped(work):
                return False
            payer = self._payer(work, work.messages[0])
            caps = [] if exempt(self.config, payer) else caps_for(self.config, payer)
            if not caps:
                return True
            states = await self.states(payer, caps)
            hold, _ = await self.store.hold_spend(
                work.turn_id,
                work.session_key,
                self.holder,
                [CapUse(s.use.key, s.cap.limit_usd) for s in states],
                # Holds live by their session lease, whose expiry is on the wall clock.
                time.time(),
            )
            if hold == Hold.HELD:
                return True
            if hold == Hold.WAIT and not waiting:
                log.info(
                    "%s: near a spending cap with other turns running; waiting", work.session_key
                )
                waiting = True
            # OVER: a sum reached its cap since it was read; the next round refuses it.
            await asyncio.sleep(HOLD_POLL_SECONDS if hold == Hold.WAIT else 0)

    async def _drop_capped(self, work: TurnWork) -> bool:
        """Take the messages of senders over a cap out of `work`; whether any are left."""
        stops: dict[str, CapState | None] = {}
        kept: list[tuple[int, InboundMessage]] = []
        dropped: list[int] = []
        for inbound_id, msg in zip(work.inbound_ids, work.messages, strict=True):
            if msg.principal not in stops:
                stops[msg.principal] = await self._over(self._payer(work, msg))
                state = stops[msg.principal]
                if state is not None:
                    await self._refuse(msg, state)
            if stops[msg.principal] is None:
                kept.append((inbound_id, msg))
            else:
                dropped.append(inbound_id)
        if dropped:
            await self.store.set_inbound_status(dropped, InboundStatus.CAPPED)
        work.inbound_ids[:] = [i for i, _ in kept]
        work.messages[:] = [m for _, m in kept]
        return bool(kept)

    async def _once(self, budget: BudgetName, key: str, period: Period) -> bool:
        """Whether this is the first time in `period` for `key` (counted in the store)."""
        now = self.clock()
        window = max(1.0, period.ends_at - now)
        return (
            await self.store.budget_take(budget, key, limit=1, window=window, now=now) is not None
        )

    async def _refuse(self, msg: InboundMessage, state: CapState) -> None:
        cap = state.cap
        log.info(
            "not answering %s in %s:%s: %s (%s of %s) is reached",
            msg.principal,
            msg.channel,
            msg.chat_id,
            cap.scope.name,
            usd(state.used),
            usd(cap.limit_usd),
        )
        # The bot's cap is told once in each chat; a person's and a chat's once in all.
        where = f"|{msg.channel}:{msg.chat_id}" if cap.scope.kind == ScopeKind.BOT else ""
        key = f"{cap.scope.name}|{state.period.key}{where}"
        if await self._once(BudgetName.CAP_NOTICES, key, state.period):
            text = over_cap_text(cap, state.period, self.zone, self.config.budgets.contact)
            await self.replies.send_text(msg.address, text)

    async def settle(self, work: TurnWork) -> None:
        """After `work`'s turn: let go of its hold and say what its cost made due. Never
        raises (a hold that could not be dropped lapses with the turn's lease)."""
        try:
            await self.store.release_spend(work.turn_id)
            if work.messages:
                await self.warn(self._payer(work, work.messages[0]), work.messages[-1].address)
        except Exception:
            log.exception("could not settle the spending of turn %s", work.turn_id)

    # --- warnings -------------------------------------------------------------------------

    async def warn(self, payer: Payer, address: Address | None) -> None:
        """Tell, once per period, whoever should hear that one of `payer`'s caps passed
        `budgets.warn_at` (or, the bot's and a chat's, was reached)."""
        warn_at = self.config.budgets.warn_at
        for state in await self.states(payer):
            personal = state.cap.scope.kind == ScopeKind.PERSON
            key = f"{state.cap.scope.name}|{state.period.key}"
            # Past the cap already, a warning would come too late: the person hears of it
            # with their next message, the admins by the note that it is reached.
            if warn_at and warn_at <= state.share < 1:
                if personal and address is not None and not exempt(self.config, payer):
                    if await self._once(BudgetName.CAP_WARNINGS, key, state.period):
                        text = warning_text(
                            state.cap, state.used, state.period, self.zone, to_admins=False
                        )
                        await self.replies.send_text(address, text)
                elif not personal and await self._once(BudgetName.CAP_WARNINGS, key, state.period):
                    await self._tell_admins(
                        warning_text(state.cap, state.used, state.period, self.zone, to_admins=True)
                    )
            if not personal and state.share >= 1:
                if await self._once(BudgetName.CAP_REACHED, key, state.period):
                    await self._tell_admins(
                        reached_text(state.cap, state.used, state.period, self.zone)
                    )

    async def _tell_admins(self, text: str) -> None:
        log.warning("spending: %s", text)
        for admin in self.config.admin.users:
            channel, _, user_id = admin.partition(":")
            if channel in self.replies.channels:
                await self.replies.send_text(Address(channel, user_id), text)

    # --- background work ------------------------------------------------------------------

    def session_payer(self, session: SessionRow) -> Payer:
        return payer_for(self.config, session_id=session.session_id, origin=session.origin)

    async def blocked(self, session: SessionRow) -> CapState | None:
        """The cap that holds `session`'s background work back now (None: none)."""
        return await self._over(self.session_payer(session))

    async def after_background(self, session: SessionRow) -> None:
        """Background work in `session` ran: warn as after a turn."""
        await self.warn(self.session_payer(session), session.address)

    # --- /status ----------------------------------------------------------------------------

    async def status_lines(self, msg: InboundMessage, session: SessionRow | None) -> list[str]:
        """Today and this month: the session's spending, and the person's (and the chat's
        and the bot's, where capped) against their caps."""
        now = self.clock()
        day, month = periods_of(now, self.zone)
        payer = payer_for(
            self.config, session_id="", origin=SessionOrigin.of(msg), principal=msg.principal
        )
        states = await self.states(payer)
        person_sums = await self.store.spend_of(
            [SpendKey(f"person:{payer.person}", p.key) for p in (day, month)], time.time()
        )
        lines = []
        for label, period, since in (
            ("Today", day, day.key),
            ("This month", month, f"{month.key}-01"),
        ):
            parts = []
            if session is not None:
                spent = sum(
                    t.cost_usd
                    for t in await self.store.cost_totals(
                        CostGroup.KIND, since_day=since, session_id=session.session_id
                    )
                )
                parts.append(f"{usd(spent)} this session")
            mine = next(
                (
                    s
                    for s in states
                    if s.period.kind == period.kind and s.cap.scope.kind == ScopeKind.PERSON
                ),
                None,
            )
            used = person_sums[SpendKey(f"person:{payer.person}", period.key)].used_usd
            parts.append(
                f"you {usd(used)} of {usd(mine.cap.limit_usd)} ({mine.share:.0%})"
                if mine is not None
                else f"you {usd(used)}"
            )
            for state in states:
                if state.period.kind != period.kind or state.cap.scope.kind == ScopeKind.PERSON:
                    continue
                who = "this chat" if state.cap.scope.kind == ScopeKind.CHAT else "the bot"
                parts.append(f"{who} {usd(state.used)} of {usd(state.cap.limit_usd)}")
            lines.append(f"{label}: " + " · ".join(parts))
        if states and exempt(self.config, payer):
            lines.append("Caps do not stop admins (budgets.admins_capped = false).")
        return lines
