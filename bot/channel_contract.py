"""The contract between the core and a channel adapter.

An adapter turns platform events into `InboundMessage`s (handed to `Gateway.accept`) and
turns `OutboundMessage`s back into platform calls. It never touches the store or the model,
and the core never imports a platform library.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, Protocol, TypeVar, runtime_checkable

from bot.config import ChannelSection

if TYPE_CHECKING:
    from aiohttp import web

    from bot.checks import Check
    from bot.config import Config
    from bot.types import (
        Address,
        ButtonPress,
        HistoryLine,
        InboundMessage,
        OutboundFile,
        OutboundMessage,
    )

# A channel's config section (`ChannelSpec.config`).
S = TypeVar("S", bound=ChannelSection)


class AcceptResult(StrEnum):
    """What `Gateway.accept` decided, so an adapter can answer its platform accordingly."""

    ACCEPTED = "accepted"  # durably queued for a turn
    DUPLICATE = "duplicate"  # seen before; already handled or queued
    BUFFERED = "buffered"  # unmentioned group message kept as context
    REFUSED = "refused"  # access policy said no (a refusal reply may have been sent)
    COMMAND = "command"  # a chat command, answered without the model
    IGNORED = "ignored"  # e.g. group policy disabled


class PressResult(StrEnum):
    """What `Gateway.press` decided about a button press."""

    DONE = "done"  # recorded (or this very press was recorded before): the message will show it
    ALREADY = "already"  # the choice was answered before, by another press
    EXPIRED = "expired"  # timed out, or the button names no choice Krill still has
    NOT_YOURS = "not_yours"  # only the person it was for, or an admin, may answer it


@dataclass(frozen=True, slots=True)
class PressAnswer:
    """`Gateway.press`'s decision and a short line for the person who pressed (Telegram shows
    it as a notification over the chat; Slack as a message only they see)."""

    result: PressResult
    text: str


class SendFailureKind(StrEnum):
    """How a send the platform did not accept may end, so the outbox knows what to do."""

    RETRY_AFTER = "retry_after"  # flood control: try again after the delay the platform named
    TRANSIENT = "transient"  # 5xx, timeout, network: back off and try again
    PERMANENT = "permanent"  # the same send can never succeed (blocked, chat gone)
    TOO_LONG = "too_long"  # the platform refused the text's length: split it and try again
    # No answer in time after the request reached the platform: it may have gone out.
    # `retry_after` is how long to wait before deciding (look it up, or resend, or not).
    UNKNOWN = "unknown"


class SendFailure(Exception):
    """Raised by `Channel.deliver` for a send the platform did not accept. The channel does
    not retry sends itself: the outbox owns retries and their schedule."""

    def __init__(self, kind: SendFailureKind, reason: str, retry_after: float = 0.0):
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.retry_after = retry_after


# What /healthz says of a channel that waits while another replica does its work (holds
# its leader lock): up, so the replica stays 200.
STANDBY: Final = "standby"
ChannelHealth = bool | Literal["standby"]


class Leadership(Protocol):
    """A leader lock: at most one of the replicas sharing the store holds it, for work the
    platform lets only one client do at a time (Telegram long polling)."""

    async def try_acquire(self) -> bool:
        """Claim the lock once; True when this replica leads now. It keeps it renewed until
        `release`, or until a renewal fails and `lost` returns."""
        ...

    async def acquire(self) -> None:
        """Return once this replica leads, waiting while another one does."""

    async def lost(self) -> None:
        """Return once this replica, having led, no longer does: stop the work at once,
        another replica may take it up."""

    async def release(self) -> None:
        """Stop leading (graceful stop), so another replica takes over at once."""


class Gateway(Protocol):
    """The core as an adapter sees it: the only part of `bot` an adapter calls."""

    async def accept(self, msg: InboundMessage) -> AcceptResult:
        """Record the message durably, then route it.

        Returns only after the message is committed to the store, so an adapter may
        acknowledge the platform as soon as this returns.
        """
        ...

    async def press(self, press: ButtonPress) -> PressAnswer:
        """Record a button press durably (once, however often it is delivered), then act on
        it in the background. Returns only after the press is committed to the store, so an
        adapter may acknowledge the platform, with the answer's text, as soon as it returns."""
        ...

    def register_bot_username(self, channel: str, username: str) -> None:
        """The bot's own username on `channel`, once signed in, so `/cmd@username` is
        recognised as addressed to it."""

    def requires_mention(self, msg: InboundMessage) -> bool:
        """Whether a group message like `msg` must address the bot (mention, reply, its
        thread) to be answered, by the conversation's policy."""
        ...

    async def session_exists(self, msg: InboundMessage) -> bool:
        """Whether `msg`'s session has any history yet (e.g. the bot is part of a thread)."""
        ...

    async def wait_idle(self, msg: InboundMessage) -> None:
        """Return once `msg`'s session has no turn queued or running and the outbox has
        handed its replies to the channel (or holds them for a later retry)."""

    async def recent_history(self, msg: InboundMessage, limit: int) -> list[HistoryLine]:
        """The last `limit` lines of `msg`'s current session that its sender took part in:
        their own messages and the replies to the turns they were in, oldest first."""
        ...

    def leadership(self, name: str) -> Leadership:
        """The leader lock `name` (e.g. "telegram:<bot id>"), for work only one replica may
        do at a time; the adapter holds it only while doing that work."""

    async def remember(self, channel: str, key: str, value: str, seconds: float) -> None:
        """Keep `value` under `key` for `seconds` (0: forget it), where every replica finds
        it (e.g. a thread the bot takes part in, or where a private answer can be sent): an
        adapter keeps in memory only what it can rebuild."""

    async def recall(self, channel: str, key: str) -> str | None:
        """What `remember` kept under `key`, on any replica; None when unknown or expired."""
        ...

    async def chat_name(self, channel: str, chat_id: str, name: str) -> None:
        """A chat's title learnt apart from any message (e.g. looked up in the background),
        for the console to show beside its sessions' keys."""

    async def wrong_token(self, channel: str, client: str) -> float:
        """Count a wrong token that `client` (an address) sent to `channel`'s own endpoints,
        across replicas: 0 when it may be told the token is wrong, else the seconds before
        it may try again (answer 429). Call it only after the right token was not given."""
        ...


class Channel(Protocol):
    """A chat platform adapter."""

    name: str
    # Seconds between streaming preview edits; 0 means "send the final reply only".
    stream_interval: float
    # Seconds between typing-indicator refreshes; 0 means the platform has none.
    typing_interval: float

    async def start(self) -> None:
        """Connect to the platform. Returns once the adapter is up (for /healthz)."""

    async def stop(self) -> None:
        """Disconnect. Also called after a `start` that failed halfway: undo what it did."""

    def routes(self) -> list[web.RouteDef]:
        """aiohttp routes this adapter serves on the shared server (webhooks, web chat)."""
        ...

    def render(self, markdown: str) -> list[str]:
        """Split a final Markdown reply into chunks that each fit one platform message.

        Formatting for the platform happens in `deliver`; chunks stay Markdown so the
        outbox and transcript hold the text as the model wrote it.
        """
        ...

    async def deliver(self, out: OutboundMessage) -> str:
        """Send `out` (or edit `out.edit_of` in place). Returns the platform message id.

        Raises `SendFailure` when the platform did not accept it (any other exception counts
        as transient). Tries once: the outbox schedules retries."""
        ...

    async def typing(self, address: Address) -> None:
        """Show one pulse of the typing indicator; the core repeats it every typing_interval."""

    async def done_typing(self, address: Address) -> None:
        """The turn answering `address` is over (replied, silent or failed): clear any
        indicator that does not expire by itself (e.g. a reaction)."""


# Abilities a channel may have beside the `Channel` contract; the core asks with isinstance.


@runtime_checkable
class HealthChannel(Protocol):
    """A channel that can tell it stopped working (e.g. its poller died): /healthz reports
    503 while `healthy` is False."""

    @property
    def healthy(self) -> bool: ...


@runtime_checkable
class StandbyChannel(Protocol):
    """A channel that waits for its leader lock while another replica does its work:
    /healthz reports it as STANDBY (up, 200) while `standby` is True."""

    @property
    def standby(self) -> bool: ...


@runtime_checkable
class SentLookupChannel(Protocol):
    """A channel whose platform carries `out.chunk_id` on a message, so the outbox can ask
    whether a send whose outcome a crash or a timeout left unknown went out, and not send
    it twice."""

    async def find_sent(self, out: OutboundMessage) -> str | None:
        """The id of the message already sent for `out.chunk_id`; None when there is none."""
        ...


@runtime_checkable
class MaybeSentChannel(Protocol):
    """A channel that cannot look sends up (no `find_sent`) and says what becomes of a send
    whose answer timed out: `resend_after_timeout` False marks it "maybe sent" instead of
    sending it again. A channel without this ability has such a send repeated."""

    @property
    def resend_after_timeout(self) -> bool: ...


@runtime_checkable
class ButtonChannel(Protocol):
    """A channel that shows `OutboundMessage.buttons` and hands their presses to
    `Gateway.press`. Elsewhere a choice is offered as text, and the person types."""

    # The longest label it shows in full; longer ones are cut to it.
    button_label_chars: int


@runtime_checkable
class FileChannel(Protocol):
    """A channel that can send files (tool `send_file`)."""

    async def send_file(self, address: Address, file: OutboundFile) -> str:
        """Upload `file` into the conversation (and thread) of `address`; returns the
        platform message or file id. Tried once, like `deliver`: raises `SendFailure` when
        the platform did not accept it, and the outbox schedules retries."""
        ...


# The replica that holds the leader lock `name` now; None when no replica does.
LeaderLookup = Callable[[str], Awaitable[str | None]]


@dataclass(frozen=True, slots=True)
class ChannelStatus:
    """What `krill status` says of a channel beside the store's counters."""

    line: str  # the line it prints
    fields: dict[str, Any]  # the same for `krill status --json`, under the channel's name


@dataclass(frozen=True, slots=True)
class ChannelSpec(Generic[S]):
    """One channel package's entry in `channels.registry`: everything the core needs to know
    about the channel, without importing its platform library. Adding a channel is adding
    its package and its entry; nothing under bot/ names a channel."""

    name: str
    # Its `[name]` section of krill.toml: the keys and their defaults, the conventional
    # variables that fill its secrets (`secret_env`), its checks across keys (`problems`)
    # and the values the logs redact (`secrets`). A chat platform's section extends
    # `ChannelPolicyConfig`, which also makes "pairing" a DM policy operators can decide.
    config: type[S]
    # The adapter for its settings, handing messages to the gateway; None when it must stay
    # off (the reason is logged). Raises ConfigError for settings the platform would refuse.
    create: Callable[[S, Config, Gateway], Channel | None]
    # `krill doctor`'s check of its tokens and reachability.
    check: Callable[[S, Config], Awaitable[list[Check]]] | None = None
    # Its part of `krill status` (e.g. which replica polls), None when it has nothing to say.
    status: Callable[[S, LeaderLookup], Awaitable[ChannelStatus | None]] | None = None
    # Whether it only works beside Krill's HTTP server (`krill chat` runs without one).
    needs_server: bool = False
    # Whether it is background work (polling, a socket): started only by `krill run`.
    background: bool = True

    def settings(self, config: Config) -> S:
        """Its section of `config`; the defaults when `config` was built without it."""
        section = config.channel(self.name)
        return section if isinstance(section, self.config) else self.config()

    def create_enabled(self, config: Config, gateway: Gateway) -> Channel | None:
        """Its adapter when its section enables it (and it need not stay off)."""
        settings = self.settings(config)
        return self.create(settings, config, gateway) if settings.enabled else None


def channel_health(channel: Channel, up: bool) -> ChannelHealth:
    """What /healthz says of `channel`, started (`up`) or not: STANDBY while it waits for its
    leader lock, else whether it is up and, if it can tell, still working."""
    if up and isinstance(channel, StandbyChannel) and channel.standby:
        return STANDBY
    return up and (channel.healthy if isinstance(channel, HealthChannel) else True)


class StateChanges:
    """When each channel's /healthz state last changed, as this process saw it: on start-up
    and at each look (/healthz, the console), so a poller going stale counts from the first
    look that found it so."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._seen: dict[str, tuple[ChannelHealth, float]] = {}

    def look(self, states: Mapping[str, ChannelHealth]) -> dict[str, ChannelHealth]:
        now = self.clock()
        for name, state in states.items():
            if name not in self._seen or self._seen[name][0] != state:
                self._seen[name] = (state, now)
        return dict(states)

    def since(self) -> dict[str, float]:
        return {name: at for name, (_, at) in self._seen.items()}
