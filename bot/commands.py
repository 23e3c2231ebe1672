"""Chat commands (/status, /reset, ...): parsing, authorization and the replies they give.

Command text never reaches the model. Admins may run every command anywhere; other allowed
users may run /status, /reset, /new and /model in their own DM (not with `dm_scope = "main"`,
where every DM shares the operator's session), and /help, /whoami and the /model listing
anywhere. In channels where
the bot reads every message (Slack), a command counts only when it addresses the bot.
Replies are built over `CommandHost`, the narrow view of the gateway the commands need. A
reply is text, or a choice offered with buttons: `/model` lists the models to tap, and
`/reset` in a longer conversation (per `session.confirm_reset`) asks before it starts afresh.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bot import __version__
from bot.buttons.choices import ChoiceSpec
from bot.config import WindowSource
from bot.sessions.access import how_to_grant_admin
from bot.sessions.breaker import is_paused
from bot.sessions.models import allowed_models, session_model
from bot.sessions.window import session_limits
from bot.store.choices import ChoiceKind, ChoiceOption
from bot.tools.policy import describe_tools, policy_for_messages
from bot.types import ButtonStyle, ChatType, InboundMessage, SessionOrigin

if TYPE_CHECKING:
    from bot.config import Config
    from bot.skills.catalog import SkillCatalog
    from bot.store.base import SessionRow

COMMANDS: dict[str, str] = {
    "status": "show this session's model, tokens, cache, context and cost",
    "reset": "start a fresh session (memory notes are kept)",
    "new": "same as /reset",
    "compact": "summarize older history now; optional focus text",
    "model": "list the models this session may use, or switch: /model <id>",
    "skills": "list the skills this chat has",
    "jobs": "list this chat's scheduled jobs, their next runs and costs",
    "stop": "stop the running reply and drop queued messages",
    "help": "list commands",
    "whoami": "show your id and whether you are an admin",
}
# Admins may run every command anywhere. Other allowed users may run the session commands
# docs/contracts.md (section 8) grants them in their own DM, and the two that only give
# information anywhere (/whoami is how a person learns the id an operator needs for admin.users).
OWN_DM_COMMANDS = {"status", "reset", "new", "model"}
INFO_COMMANDS = {"help", "whoami", "skills", "jobs"}
# Commands that change the session run in its lane, after the turn in progress.
LANE_COMMANDS = {"reset", "new", "compact"}
# /reset and /new ask first (where session.confirm_reset says so) in a session with more
# person turns than this.
CONFIRM_RESET_AFTER_TURNS = 3
RESET, KEEP = "reset", "keep"


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    args: str


def parse_command(text: str, bot_username: str = "") -> Command | None:
    """`/name[@bot] args` -> Command, for known commands only; anything else is a message.

    A command addressed to another bot (`/status@otherbot`) is not ours.
    """
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    parts = stripped[1:].split(maxsplit=1)  # any whitespace: "/compact\nfocus" counts too
    if not parts:
        return None
    head, args = parts[0], parts[1] if len(parts) > 1 else ""
    name, _, target = head.partition("@")
    name = name.lower()
    if name not in COMMANDS:
        return None
    if target and bot_username and target.lower() != bot_username.lower():
        return None
    return Command(name, args.strip())


def refusal(command: Command, msg: InboundMessage) -> str:
    """The reply to a command `msg`'s sender may not run: says what an operator changes."""
    return (
        f"Sorry, only an admin can use /{command.name} here. "
        f"To allow it, an operator can {how_to_grant_admin(msg.principal)}."
    )


def addressed(msg: InboundMessage) -> bool:
    """Whether command text in `msg` was meant for the bot: always in a DM, a group (where
    Telegram delivers commands to bots) or a native command route; in a Slack channel only
    when the bot was mentioned or it is a thread the bot takes part in."""
    return msg.chat_type != ChatType.CHANNEL or msg.mentioned or msg.is_command_surface


def authorized(command: Command, msg: InboundMessage, *, admin: bool, shared_dm: bool) -> bool:
    """May `msg`'s sender run `command`? `shared_dm`: DMs share one session (dm_scope main),
    so no DM is the sender's own."""
    if admin or command.name in INFO_COMMANDS:
        return True
    if command.name == "model" and not command.args:
        return True  # listing the models only gives information
    own_dm = msg.chat_type == ChatType.DIRECT and not shared_dm
    return command.name in OWN_DM_COMMANDS and own_dm


class CommandHost(Protocol):
    """What the commands need (`bot.gateway.session_commands.SessionCommands`)."""

    config: Config
    model_configured: bool
    skills: SkillCatalog | None

    def is_admin(self, msg: InboundMessage) -> bool: ...
    def shows_buttons(self, channel: str) -> bool: ...
    async def current_session(self, key: str) -> SessionRow | None: ...
    def waiting(self, key: str) -> int: ...
    def running(self, key: str) -> bool: ...
    def tool_names(self) -> list[str]: ...
    def status_lines(self, key: str) -> list[str]: ...
    async def spending_lines(self, msg: InboundMessage, session: SessionRow | None) -> list[str]:
        """Today's and this month's spending: the session's and the person's against caps."""
        ...

    async def reset(self, key: str, origin: SessionOrigin, *, reason: str) -> SessionRow: ...
    async def stop(self, key: str) -> int: ...
    async def compact(self, key: str, focus: str) -> str: ...
    async def choose_model(self, key: str, origin: SessionOrigin, model: str) -> SessionRow: ...
    async def previous_session(self, session: SessionRow) -> SessionRow | None: ...
    async def jobs(self, msg: InboundMessage) -> str: ...


def _ago(timestamp: float | None) -> str:
    if not timestamp:
        return "never"
    seconds = int(time.time() - timestamp)
    if seconds < 60:
        return f"{seconds}s ago"
    if seconds < 3600:
        return f"{seconds // 60}m ago"
    if seconds < 86400:
        return f"{seconds // 3600}h ago"
    return dt.datetime.fromtimestamp(timestamp, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


# A command's answer: text, or a choice offered with buttons.
Reply = Callable[[CommandHost, Command, InboundMessage, str], Awaitable[str | ChoiceSpec]]


async def reply_help(host: CommandHost, command: Command, msg: InboundMessage, key: str) -> str:
    lines = [f"Krill {__version__} commands:"]
    lines += [f"/{name} - {desc}" for name, desc in COMMANDS.items()]
    return "\n".join(lines)


async def reply_whoami(host: CommandHost, command: Command, msg: InboundMessage, key: str) -> str:
    admin = host.is_admin(msg)
    name = f" ({msg.user_name})" if msg.user_name else ""
    return f"You are {msg.principal}{name}.\nSession: {key}\nAdmin: {'yes' if admin else 'no'}"


WINDOW_SOURCES = {
    WindowSource.MODEL: "the model's limit",
    WindowSource.LEARNED: "learned from the provider",
    WindowSource.CONFIG: "agent.context_window",
}


def _compaction_line(session: SessionRow) -> str | None:
    """The compaction breaker, when it has something to say."""
    failures, until = session.compaction_failures, session.compaction_paused_until
    if is_paused(until, time.time()):
        when = dt.datetime.fromtimestamp(until or 0, dt.UTC).strftime("%H:%M UTC")
        return (
            f"⚠️ Compaction: paused until {when} after {failures} failures in a row; "
            "the oldest turns are left out of requests meanwhile (/compact tries now)"
        )
    if failures:
        return f"Compaction: {failures} failure(s) in a row"
    return None


async def reply_status(host: CommandHost, command: Command, msg: InboundMessage, key: str) -> str:
    session = await host.current_session(key)
    cfg = host.config
    model = current_model(cfg, session)
    lines = [f"🦐 Krill {__version__}", f"Model: {model}"]
    if session is not None and session.model and session.model != model:
        # A fallback model stood in (agent.fallback_models), or the choice changed since.
        lines[-1] += f" · last turn answered by {session.model}"
    lines.append(f"Session: {key}")
    if session is None:
        lines.append("Session id: (none yet - send a message to start one)")
    else:
        used = session.context_tokens
        limits = session_limits(cfg, session)
        window = limits.window
        lines += [
            f"Session id: {session.session_id} (started {_ago(session.created_at)})",
            f"Tokens: {_k(session.input_tokens)} in / {_k(session.output_tokens)} out",
            f"Cache: {_k(session.cache_read_tokens)} read / {_k(session.cache_write_tokens)} write"
            f" · hit ratio {session.cache_hit_ratio:.0%}",
            f"Context: {_k(used)}/{_k(window)} ({used / window:.0%})"
            f" · window from {WINDOW_SOURCES[limits.source]}"
            f" · Compactions: {session.compaction_count}",
            f"Last memory flush: {_ago(session.memory_flush_at)}"
            + (
                f" · last error: {session.memory_flush_error}" if session.memory_flush_error else ""
            ),
            f"Estimated cost: ${session.cost_usd:.4f}",
            f"Turns: {session.turns} · Errors: {session.errors}",
        ]
        breaker = _compaction_line(session)
        if breaker is not None:
            lines.append(breaker)
        previous = await host.previous_session(session)
        if previous is not None:
            lines.append(
                f"Previous session: {previous.session_id} (read it on the host: "
                f"krill sessions show {key})"
            )
    lines.extend(await host.spending_lines(msg, session))
    lines.append(f"Queue: {host.waiting(key)} waiting{' · busy' if host.running(key) else ''}")
    if not host.model_configured:
        lines.append("⚠️ No model API key: set ANTHROPIC_API_KEY and restart.")
    policy = policy_for_messages(cfg, [msg])
    usable = [name for name in host.tool_names() if policy.allows(name)]
    lines.append(f"Tools: {describe_tools(usable)}")
    lines.extend(host.status_lines(key))
    return "\n".join(lines)


async def reply_skills(host: CommandHost, command: Command, msg: InboundMessage, key: str) -> str:
    """The skills this chat has, as its prompt lists them; admins also hear of the skills
    left out because their SKILL.md is broken."""
    if host.skills is None:
        return "No skills in this chat."
    policy = policy_for_messages(host.config, [msg])
    usable = host.skills.available(SessionOrigin.of(msg), policy.allows)
    lines = [f"Skills in this chat ({len(usable)}):" if usable else "No skills in this chat."]
    lines += [f"• {s.name} - {s.description}" for s in usable]
    problems = host.skills.scan().problems
    if problems and host.is_admin(msg):
        lines.append(f"⚠️ Left out ({len(problems)}); fixed, they load on the next turn:")
        lines += [f"• {problem}" for problem in problems]
    return "\n".join(lines)


def asks_before_reset(config: Config, chat_type: ChatType, session: SessionRow | None) -> bool:
    """Whether /reset asks "are you sure?" first (`session.confirm_reset`)."""
    when = config.session.confirm_reset
    where = when == "always" or (when == "groups" and chat_type != ChatType.DIRECT)
    return where and session is not None and session.turns > CONFIRM_RESET_AFTER_TURNS


async def reply_reset(
    host: CommandHost, command: Command, msg: InboundMessage, key: str
) -> str | ChoiceSpec:
    origin = SessionOrigin.of(msg)
    reason = f"/{command.name}"
    current = await host.current_session(key)
    if current is not None and asks_before_reset(host.config, msg.chat_type, current):
        if host.shows_buttons(msg.channel):
            return ChoiceSpec(
                kind=ChoiceKind.RESET,
                text=(
                    f"This conversation has {current.turns} turns. Start a fresh session? "
                    "Memory notes are kept, and the old transcript stays readable."
                ),
                options=(
                    ChoiceOption("🧹 Start fresh", RESET, ButtonStyle.DANGER),
                    ChoiceOption("Keep it", KEEP),
                ),
                owner=msg.principal,
                owner_name=msg.user_name,
                payload={
                    "session_id": current.session_id,
                    "origin": origin.to_dict(),
                    "reason": reason,
                },
                columns=2,
            )
    session = await host.reset(key, origin, reason=reason)
    model = current_model(host.config, session)
    return f"✅ New session started: {session.session_id}\nKey: {key} · Model: {model}"


def current_model(config: Config, session: SessionRow | None) -> str:
    """The model a session's next request uses (a choice agent.models dropped is not it)."""
    return session_model(config, session.chosen_model if session else "").model


def _model_list(config: Config, current: str) -> str:
    return "\n".join(
        f"{'▶' if model == current else '•'} {model}{' (current)' if model == current else ''}"
        for model in allowed_models(config)
    )


def model_listing(config: Config, current: str) -> str:
    """`/model`'s list of the models a session may use, `current` marked."""
    return f"Models for this session:\n{_model_list(config, current)}"


async def reply_model(
    host: CommandHost, command: Command, msg: InboundMessage, key: str
) -> str | ChoiceSpec:
    cfg = host.config
    current = current_model(cfg, await host.current_session(key))
    wanted = command.args.strip()
    if not wanted:
        listing = model_listing(cfg, current)
        models = allowed_models(cfg)
        # Buttons only for someone who may switch: the listing alone is for everyone.
        switch = Command("model", models[0])
        may = authorized(
            switch,
            msg,
            admin=host.is_admin(msg),
            shared_dm=cfg.session.dm_scope == "main",
        )
        if len(models) < 2 or not may:
            return f"{listing}\nSwitch with /model <id>."
        return ChoiceSpec(
            kind=ChoiceKind.MODEL,
            text=f"{listing}\nTap one to switch (or send /model <id>).",
            options=tuple(
                ChoiceOption(
                    model, model, ButtonStyle.PRIMARY if model == current else ButtonStyle.PLAIN
                )
                for model in models
            ),
            owner=msg.principal,
            owner_name=msg.user_name,
            payload={"origin": SessionOrigin.of(msg).to_dict()},
            fallback=f"{listing}\nSwitch with /model <id>.",
        )
    if wanted not in allowed_models(cfg):
        return f"Unknown model {wanted!r}. Choose one of:\n{_model_list(cfg, current)}"
    if wanted == current:
        return f"This session already uses {wanted}."
    await host.choose_model(key, SessionOrigin.of(msg), wanted)
    return (
        f"✅ Model switched to {wanted} (was {current}). The next request starts a new prompt "
        "cache for this model (a cache break: that request costs a full cache write)."
    )


async def reply_stop(host: CommandHost, command: Command, msg: InboundMessage, key: str) -> str:
    dropped = await host.stop(key)
    return f"⏹ Stopped. {dropped} queued message(s) dropped."


async def reply_compact(host: CommandHost, command: Command, msg: InboundMessage, key: str) -> str:
    return await host.compact(key, command.args[:800])


async def reply_jobs(host: CommandHost, command: Command, msg: InboundMessage, key: str) -> str:
    return await host.jobs(msg)


REPLIES: dict[str, Reply] = {
    "help": reply_help,
    "whoami": reply_whoami,
    "status": reply_status,
    "reset": reply_reset,
    "new": reply_reset,
    "stop": reply_stop,
    "compact": reply_compact,
    "model": reply_model,
    "skills": reply_skills,
    "jobs": reply_jobs,
}
