"""What a Slack post means to Krill: pure functions from Events API payloads and slash commands
to `InboundMessage`s, and from fetched thread history to labelled context lines.

The adapter does the I/O (who is in which thread, user names, thread history); every decision
about skipping, mentions, threads and text lives here so it can be tested without Slack.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.commands import COMMANDS
from bot.types import Address, ChatType, InboundMessage

CHANNEL = "slack"
# Thread messages fetched as context when a thread session starts in a thread the bot was
# not part of (conversations.replies); the root is always kept, then the newest ones.
THREAD_HISTORY_LIMIT = 20
# One long message must not crowd the rest of the thread out of the context.
HISTORY_LINE_CHARS = 2_000

# Subtypes that carry a person's words; everything else (edits, deletions, joins, topic
# changes, ...) is housekeeping the bot must not answer.
TEXT_SUBTYPES = frozenset({"thread_broadcast", "file_share", "me_message"})
BOT_SUBTYPE = "bot_message"
MESSAGE_EVENTS = frozenset({"message", "app_mention"})
CHANNEL_TYPES = {
    "im": ChatType.DIRECT,
    "channel": ChatType.CHANNEL,
    "group": ChatType.CHANNEL,
    "mpim": ChatType.CHANNEL,
}

_SPECIAL = re.compile(r"<([^<>\n]+)>")
_SPACE_BEFORE_PUNCT = re.compile(r"^[\s,:;]+")


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who the bot is in this workspace, from auth.test."""

    user_id: str
    bot_id: str
    team_id: str = ""
    name: str = "krill"


@dataclass(frozen=True, slots=True)
class Skip:
    """An event the bot acknowledges and otherwise ignores; `reason` goes into debug logs."""

    reason: str


@dataclass(frozen=True, slots=True)
class SlackPost:
    """A person's (or an allowed bot's) message, as far as the event alone can tell."""

    channel: str
    ts: str
    user: str
    text: str  # Slack markup turned into plain text, the leading bot mention removed
    chat_type: ChatType
    team: str = ""
    thread_ts: str | None = None  # set only for replies inside a thread
    mentioned: bool = False  # app_mention, or <@BOT> anywhere in the text
    parent_is_bot: bool = False  # a reply in a thread the bot's own message started
    user_name: str = ""  # known only for bots (their display name)
    files: tuple[dict[str, Any], ...] = ()  # Slack file objects attached to the post

    @property
    def message_id(self) -> str:
        # Not the event_id: app_mention and message.channels deliver the same post as two
        # events, and both must map to one message for the core's dedupe.
        return f"{self.channel}:{self.ts}"

    @property
    def is_thread_reply(self) -> bool:
        return self.thread_ts is not None


def _mention_pattern(user_id: str) -> re.Pattern[str]:
    return re.compile(rf"<@{re.escape(user_id)}(?:\|[^>]*)?>")


def mentions_bot(text: str, me: BotIdentity) -> bool:
    return bool(_mention_pattern(me.user_id).search(text))


def mentioned_users(text: str) -> tuple[str, ...]:
    """User ids written as `<@U…>` in raw Slack text, in order, without repeats."""
    found = re.findall(r"<@([A-Z0-9]+)(?:\|[^>]*)?>", text)
    return tuple(dict.fromkeys(found))


def _special(token: str, me: BotIdentity, names: Mapping[str, str]) -> str:
    """Plain text for one `<...>` construct of Slack's markup."""
    target, _, label = token.partition("|")
    if target.startswith("@"):
        user = target[1:]
        if user == me.user_id:
            return f"@{me.name}"
        return f"@{label or names.get(user) or user}"
    if target.startswith("#"):
        return f"#{label or target[1:]}"
    if target.startswith("!"):
        command = target[1:]
        if command.startswith("subteam^"):
            return label or "@group"
        if command in ("here", "channel", "everyone"):
            return f"@{command}"
        return label or command
    if label and label != target and not target.startswith("mailto:"):
        return f"{label} ({target})"
    return label or target.removeprefix("mailto:")


def clean_text(
    text: str, me: BotIdentity, names: Mapping[str, str] | None = None, *, strip_mention: bool
) -> str:
    """Slack markup (`<@U1>`, `<#C1|x>`, `<url|label>`, `&amp;`) as plain readable text.

    With `strip_mention`, a leading mention of the bot is dropped: "<@BOT> what's up" asks
    "what's up", and the model should not see its own id.
    """
    if strip_mention:
        match = _mention_pattern(me.user_id).match(text.lstrip())
        if match:
            text = _SPACE_BEFORE_PUNCT.sub("", text.lstrip()[match.end() :])
    plain = _SPECIAL.sub(lambda m: _special(m.group(1), me, names or {}), text)
    return html.unescape(plain).strip()


def _file_lines(event: Mapping[str, Any]) -> list[str]:
    files = event.get("files")
    if not isinstance(files, list):
        return []
    lines = []
    for item in files:
        if isinstance(item, dict):
            name = item.get("name") or item.get("title") or "file"
            kind = item.get("mimetype") or item.get("filetype") or "unknown type"
            lines.append(f"[attached file: {name} ({kind})]")
    return lines


def message_text(
    message: Mapping[str, Any],
    me: BotIdentity,
    names: Mapping[str, str] | None,
    *,
    strip_mention: bool,
) -> str:
    """A message's words as plain text, with a line per attached file."""
    text = message.get("text")
    raw = text if isinstance(text, str) else ""
    parts = [clean_text(raw, me, names, strip_mention=strip_mention), *_file_lines(message)]
    return "\n".join(part for part in parts if part)


def _chat_type(event: Mapping[str, Any]) -> ChatType | None:
    channel_type = event.get("channel_type")
    if channel_type:
        return CHANNEL_TYPES.get(str(channel_type))
    # app_mention carries no channel_type; the id's first letter tells DMs (D) apart.
    return ChatType.DIRECT if str(event.get("channel", "")).startswith("D") else ChatType.CHANNEL


def is_own(event: Mapping[str, Any], me: BotIdentity) -> bool:
    return event.get("user") == me.user_id or (
        bool(event.get("bot_id")) and event.get("bot_id") == me.bot_id
    )


def parse_event(
    event: Mapping[str, Any],
    me: BotIdentity,
    *,
    allow_bots: bool = False,
    team_id: str = "",
    names: Mapping[str, str] | None = None,
) -> SlackPost | Skip:
    """Decide whether an Events API `event` is a message for Krill and extract what it says.

    `names` (user id -> display name, as far as known) turns `<@U1>` into `@Ann`.
    """
    kind = event.get("type")
    if kind not in MESSAGE_EVENTS:
        return Skip(f"event type {kind!r} is not a message")
    subtype = event.get("subtype")
    is_bot = bool(event.get("bot_id")) or subtype == BOT_SUBTYPE
    if is_own(event, me):
        return Skip("the bot's own message")
    if subtype is not None and subtype not in TEXT_SUBTYPES and subtype != BOT_SUBTYPE:
        return Skip(f"message subtype {subtype!r}")
    if event.get("hidden"):
        return Skip("hidden message")
    if is_bot and not allow_bots:
        return Skip("another bot's message (slack.allow_bots is off)")
    channel, ts = event.get("channel"), event.get("ts")
    user = event.get("user") or (event.get("bot_id") if is_bot else None)
    if not isinstance(channel, str) or not isinstance(ts, str) or not isinstance(user, str):
        return Skip("message without channel, ts or user")
    chat_type = _chat_type(event)
    if chat_type is None:
        return Skip(f"unknown channel_type {event.get('channel_type')!r}")

    raw = event.get("text")
    text = message_text(event, me, names, strip_mention=True)
    if not text:
        return Skip("message without text")
    thread_ts = event.get("thread_ts")
    reply_in_thread = isinstance(thread_ts, str) and thread_ts != ts
    bot_name = ""
    if is_bot:
        profile = event.get("bot_profile")
        bot_name = event.get("username") or (profile or {}).get("name") or ""
    return SlackPost(
        channel=channel,
        ts=ts,
        user=user,
        text=text,
        chat_type=chat_type,
        team=str(event.get("team") or team_id or me.team_id),
        thread_ts=thread_ts if reply_in_thread else None,
        mentioned=kind == "app_mention" or (isinstance(raw, str) and mentions_bot(raw, me)),
        parent_is_bot=reply_in_thread and event.get("parent_user_id") == me.user_id,
        user_name=bot_name,
        files=tuple(f for f in event.get("files") or () if isinstance(f, dict)),
    )


def reply_thread(post: SlackPost, *, mentioned: bool) -> str | None:
    """The thread a post belongs to (and the reply goes to), or None for the channel itself.

    A top-level mention in a channel opens a thread under that very post, so the post is
    the first message of the thread's session; unmentioned top-level posts stay on the
    channel's own key, where the core keeps them as context.
    """
    if post.thread_ts is not None:
        return post.thread_ts
    if post.chat_type == ChatType.CHANNEL and mentioned:
        return post.ts
    return None


def to_inbound(
    post: SlackPost,
    *,
    mentioned: bool,
    user_name: str = "",
    context_lines: Iterable[str] = (),
) -> InboundMessage:
    """The `InboundMessage` for `post`; `mentioned` also covers threads the bot takes part in."""
    is_dm = post.chat_type == ChatType.DIRECT
    thread = reply_thread(post, mentioned=mentioned)
    return InboundMessage(
        channel=CHANNEL,
        message_id=post.message_id,
        chat_type=post.chat_type,
        chat_id=post.channel,
        user_id=post.user,
        user_name=user_name or post.user_name,
        text=post.text,
        address=Address(CHANNEL, post.channel, thread_id=thread, reply_to=post.ts),
        thread_id=thread,
        mentioned=mentioned or is_dm,
        timestamp=_ts_seconds(post.ts),
        context_lines=list(context_lines),
        meta={"team": post.team} if post.team else {},
    )


def _ts_seconds(ts: str) -> float:
    try:
        return float(ts)
    except ValueError:
        return 0.0


def slash_text(text: str) -> str | None:
    """`/krill <command> [args]` as the chat command text the core parses, or None if unknown.

    A bare `/krill` asks for help.
    """
    words = text.strip()
    if not words:
        return "/help"
    name = words.split()[0].lstrip("/").lower()
    if name not in COMMANDS:
        return None
    return "/" + words.lstrip("/")


def slash_message(payload: Mapping[str, Any], text: str) -> InboundMessage:
    """The `InboundMessage` for a slash command; its reply is shown only to the sender."""
    channel = str(payload.get("channel_id", ""))
    user = str(payload.get("user_id", ""))
    is_dm = channel.startswith("D") or payload.get("channel_name") == "directmessage"
    return InboundMessage(
        channel=CHANNEL,
        # Slash commands are never retried by Slack; the trigger id names this invocation.
        message_id=f"command:{payload.get('trigger_id') or payload.get('response_url', '')}",
        chat_type=ChatType.DIRECT if is_dm else ChatType.CHANNEL,
        chat_id=channel,
        user_id=user,
        user_name=str(payload.get("user_name", "")),
        text=text,
        address=Address(CHANNEL, channel, private_to=user),
        mentioned=True,
        is_command_surface=True,
        meta={"team": str(payload.get("team_id", ""))},
    )


def history_users(messages: Iterable[Mapping[str, Any]]) -> set[str]:
    """User ids whose names a thread's context lines need (authors and mentions)."""
    users: set[str] = set()
    for message in messages:
        if isinstance(message.get("user"), str) and not message.get("bot_id"):
            users.add(message["user"])
        if isinstance(message.get("text"), str):
            users.update(mentioned_users(message["text"]))
    return users


def thread_context_lines(
    messages: Iterable[Mapping[str, Any]],
    *,
    before_ts: str,
    me: BotIdentity,
    names: Mapping[str, str],
    limit: int = THREAD_HISTORY_LIMIT,
    after_ts: str | None = None,
) -> list[str]:
    """Earlier thread messages as "sender: text" lines: the root, then the newest ones.

    Only messages older than `before_ts` (the post being answered) count, so the post is
    not repeated as its own context. With `after_ts` (when the bot last looked) only what
    others posted after it counts: what the bot saw or said then is in its transcript.
    """
    cutoff = _ts_seconds(before_ts)
    since = _ts_seconds(after_ts) if after_ts is not None else None
    lines: list[str] = []
    for message in messages:
        ts = message.get("ts")
        if not isinstance(ts, str) or _ts_seconds(ts) >= cutoff:
            continue
        if since is not None and (_ts_seconds(ts) <= since or is_own(message, me)):
            continue
        subtype = message.get("subtype")
        if subtype is not None and subtype not in TEXT_SUBTYPES and subtype != BOT_SUBTYPE:
            continue
        text = message_text(message, me, names, strip_mention=False)
        if not text:
            continue
        if len(text) > HISTORY_LINE_CHARS:
            text = text[:HISTORY_LINE_CHARS].rstrip() + " …"
        lines.append(f"{_sender(message, me, names)}: {text}")
    if len(lines) > limit:
        lines = [lines[0], *lines[len(lines) - (limit - 1) :]]
    return lines


def _sender(message: Mapping[str, Any], me: BotIdentity, names: Mapping[str, str]) -> str:
    if is_own(message, me):
        return f"{me.name} (you)"
    if message.get("bot_id"):
        profile = message.get("bot_profile") or {}
        return str(message.get("username") or profile.get("name") or "bot")
    user = str(message.get("user", "someone"))
    return names.get(user) or user
