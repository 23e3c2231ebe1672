"""Telegram updates -> `InboundMessage`: chat type and session ids, forum topics, whether the
bot was addressed, and text for messages that carry no text of their own.

Pure functions over python-telegram-bot's data objects; no network, no store.

Text reaches the model as the person saw it: a hyperlink (`text_link`) becomes `[text](url)`,
and a forwarded message says who or where it was forwarded from.

Decisions made here (docs/channels.md, "Telegram"):
- Forum topics get `thread_id` = `message_thread_id`, only for topic messages in forum chats.
  Ordinary supergroups also put `message_thread_id` on replies, which are not topics. The
  General topic carries no thread id and maps to the group's own session key.
- Edited messages are ignored: the original was already answered, and re-answering every
  typo fix would double the cost and the noise.
- Messages from bots (including our own) are ignored, so two bots can never loop.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from telegram import (
    Chat,
    Message,
    MessageEntity,
    MessageOrigin,
    MessageOriginChannel,
    MessageOriginChat,
    MessageOriginHiddenUser,
    MessageOriginUser,
    Update,
)
from telegram.ext import filters

from bot.types import Address, ChatType, InboundMessage

CHANNEL = "telegram"
# Updates the bot asks Telegram for (messages, and presses of its buttons); anything else
# (edits, reactions, members) is not needed.
ALLOWED_UPDATES: tuple[str, ...] = (Update.MESSAGE, Update.CALLBACK_QUERY)

# Names shorter than this would match ordinary words ("AI") far too often.
MIN_NAME_LENGTH = 3
_IDENTITY_NAME = re.compile(r"^\W*name\W*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
# What may follow a leading @mention before the real text starts ("@bot, hi", "@bot: hi").
_MENTION_TRAIL = " \t\n,:;.!-"
# Hosts of links that open a Telegram username, as t.me/<username> does.
_USERNAME_HOSTS = frozenset({"t.me", "telegram.me", "telegram.dog"})


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who the bot is on Telegram, from getMe, plus the names people may call it by."""

    id: int
    username: str
    names: tuple[str, ...] = ()

    def name_in(self, text: str) -> bool:
        """Whether `text` calls the bot by name or username (a whole word, any case), or by
        its @handle, entity or not."""
        pattern = _name_pattern((*self.names, self.username))
        if pattern is not None and pattern.search(text) is not None:
            return True
        return _handle_pattern(self.username).search(text) is not None

    def linked_by(self, url: str) -> bool:
        """Whether a link opens the bot: `tg://user?id=<id>` (a tap-to-mention; also written
        `tg://user/?id=` and `tg://openmessage?user_id=`), `tg://resolve?domain=<username>`
        or `https://t.me/<username>`."""
        link = urlsplit(url.strip())
        query = parse_qs(link.query)
        if link.scheme.lower() == "tg":
            place = (link.netloc or link.path).strip("/").lower()
            if place in ("user", "openmessage"):
                return str(self.id) in query.get("id", []) + query.get("user_id", [])
            usernames = query.get("domain", []) if place == "resolve" else []
        elif link.scheme.lower() in ("http", "https") and link.hostname in _USERNAME_HOSTS:
            usernames = [link.path.strip("/").partition("/")[0]]
        else:
            return False
        return any(name.casefold() == self.username.casefold() for name in usernames)


@functools.lru_cache(maxsize=8)
def _name_pattern(names: tuple[str, ...]) -> re.Pattern[str] | None:
    words = {n.strip() for n in names if len(n.strip()) >= MIN_NAME_LENGTH}
    if not words:
        return None
    # Longest first so "Krill Bot" wins over "Krill"; never right after @ or /, where the word
    # would be someone else's @handle or a /command.
    alternatives = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    return re.compile(rf"(?<![\w@/])(?:{alternatives})(?!\w)", re.IGNORECASE)


@functools.lru_cache(maxsize=8)
def _handle_pattern(username: str) -> re.Pattern[str]:
    # Not inside a longer handle ("@krill_bot_fan") nor an e-mail address.
    return re.compile(rf"(?<![\w@])@{re.escape(username)}(?!\w)", re.IGNORECASE)


def identity_name(identity_md: str) -> str | None:
    """The `Name:` line of the workspace's IDENTITY.md (e.g. "- Name: Krill" -> "Krill")."""
    match = _IDENTITY_NAME.search(identity_md)
    if match is None:
        return None
    return match.group(1).strip("*_` ") or None


def chat_type_of(chat: Chat) -> ChatType | None:
    """DIRECT for private chats, GROUP for groups and supergroups, None for channels."""
    if chat.type == Chat.PRIVATE:
        return ChatType.DIRECT
    if chat.type in (Chat.GROUP, Chat.SUPERGROUP):
        return ChatType.GROUP
    return None


def topic_id(message: Message) -> str | None:
    """The forum topic a message belongs to, or None (not a forum, or the General topic)."""
    if message.chat.is_forum and message.is_topic_message and message.message_thread_id:
        return str(message.message_thread_id)
    return None


def is_reply_to_bot(message: Message, bot: BotIdentity) -> bool:
    """A real reply to one of the bot's messages, whatever it carried: text, a caption, or
    only a sticker, a photo or a voice note (or something Krill has no name for).

    Inside a forum topic every message "replies" to the topic's creation service message,
    which may well be the bot's own if it opened the topic; that is not a reply.
    A reply to one of the bot's service messages (a topic it closed, hid or renamed, a pin)
    is not one either: there is nothing there the person could be answering.
    """
    target = message.reply_to_message
    if target is None or target.from_user is None or target.from_user.id != bot.id:
        return False
    if filters.StatusUpdate.ALL.check_update(Update(0, message=target)):
        return False
    return not (message.is_topic_message and target.message_id == message.message_thread_id)


def _entities(message: Message) -> dict[MessageEntity, str]:
    kinds: list[str | None] = [
        MessageEntity.TEXT_MENTION,
        MessageEntity.BOT_COMMAND,
        MessageEntity.TEXT_LINK,
    ]
    if message.text is not None:
        return message.parse_entities(kinds)
    return message.parse_caption_entities(kinds)


def is_addressed(message: Message, bot: BotIdentity) -> bool:
    """Whether the bot was addressed: its @handle (a mention, or typed), a tap-to-mention (a
    text mention of it, or a link to it), /command@bot, its name, or a reply to one of its
    messages."""
    handle = f"@{bot.username}".casefold()
    for entity, text in _entities(message).items():
        if entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == bot.id:
            return True
        if entity.type == MessageEntity.BOT_COMMAND and text.casefold().endswith(handle):
            return True
        if entity.type == MessageEntity.TEXT_LINK and entity.url and bot.linked_by(entity.url):
            return True
    if bot.name_in(message.text or message.caption or ""):  # @handle mentions included
        return True
    return is_reply_to_bot(message, bot)


def strip_leading_mention(text: str, username: str) -> str:
    """`@bot, what's up?` -> `what's up?`; text that is only the mention is kept as it is, so
    the model still sees that it was called."""
    handle = f"@{username}"
    stripped = text.lstrip()
    if not stripped.casefold().startswith(handle.casefold()):
        return text
    rest = stripped[len(handle) :]
    if rest[:1].isalnum() or rest[:1] == "_":
        return text  # a longer handle that merely starts with ours
    return rest.lstrip(_MENTION_TRAIL) or text


def _join(*parts: object) -> str:
    return " ".join(str(p) for p in parts if p)


def placeholder(message: Message) -> str | None:
    """A short stand-in for content the model cannot see (photos, voice, ...), or None.

    Order matters: a venue also carries a location, and a GIF also carries a document.
    """
    if message.venue:
        return f"[venue: {_join(message.venue.title, message.venue.address)}]"
    if message.location:
        return f"[location: {message.location.latitude:.5f}, {message.location.longitude:.5f}]"
    if message.animation:
        return "[GIF]"
    if message.photo:
        return "[photo]"
    if message.sticker:
        return _join("[sticker", message.sticker.emoji) + "]"
    if message.voice:
        return "[voice message]"
    if message.video_note:
        return "[video message]"
    if message.video:
        return "[video]"
    if message.audio:
        title = _join(message.audio.performer, message.audio.title)
        return f"[audio: {title}]" if title else "[audio]"
    if message.document:
        name = message.document.file_name
        return f"[document: {name}]" if name else "[document]"
    if message.contact:
        return f"[contact: {_join(message.contact.first_name, message.contact.last_name)}]"
    if message.poll:
        return f"[poll: {message.poll.question}]"
    if message.dice:
        return f"[dice: {message.dice.emoji} {message.dice.value}]"
    if message.story:
        return "[story]"
    if getattr(message, "paid_media", None):
        return "[paid media]"
    return None


def with_links(text: str, entities: Sequence[MessageEntity]) -> str:
    """`text` with each hyperlink written as `[label](url)`, so the target is not lost.

    Entity offsets count UTF-16 code units, hence the detour through UTF-16.
    """
    links = sorted(
        (e for e in entities if e.type == MessageEntity.TEXT_LINK and e.url),
        key=lambda e: e.offset,
    )
    if not links:
        return text
    units = text.encode("utf-16-le")

    def part(start: int, end: int) -> str:
        return units[2 * start : 2 * end].decode("utf-16-le", errors="replace")

    out: list[str] = []
    done = 0
    for link in links:
        start, end = link.offset, link.offset + link.length
        if start < done:
            continue  # overlaps the previous link: keep the text as it is
        label = part(start, end)
        out.append(part(done, start))
        out.append(label if label.strip() == link.url else f"[{label}]({link.url})")
        done = end
    out.append(part(done, len(units) // 2))
    return "".join(out)


def _who(name: str, username: str | None) -> str:
    return f"{name} (@{username})" if username else name


def forwarded_from(origin: MessageOrigin) -> str:
    """Who or where a forwarded message came from, as the person's client shows it."""
    if isinstance(origin, MessageOriginUser):
        user = origin.sender_user
        return _who(user.full_name, user.username)
    if isinstance(origin, MessageOriginHiddenUser):
        return origin.sender_user_name
    if isinstance(origin, MessageOriginChat | MessageOriginChannel):
        chat = origin.sender_chat if isinstance(origin, MessageOriginChat) else origin.chat
        where = _who(chat.title or str(chat.id), chat.username)
        signed = f", signed {origin.author_signature}" if origin.author_signature else ""
        return f"{where}{signed}"
    return "someone"


def message_text(message: Message) -> str | None:
    """What the person said: the text (links kept), or a placeholder plus any caption, headed
    by where a forward came from; None for messages with nothing to say (service messages
    such as members joining)."""
    if message.text is not None:
        said: str | None = with_links(message.text, message.entities)
    else:
        stand_in = placeholder(message)
        caption = with_links(message.caption, message.caption_entities) if message.caption else None
        said = f"{stand_in}\n{caption}" if stand_in and caption else stand_in or caption
    if said is None or message.forward_origin is None:
        return said
    return f"[forwarded from {forwarded_from(message.forward_origin)}]\n{said}"


def _sender(message: Message) -> tuple[str, str, bool] | None:
    """(user id, display name, is a bot) of whoever sent `message`."""
    if message.sender_chat is not None:
        # Anonymous group admins and channels speak as a chat; the chat is the sender.
        chat = message.sender_chat
        return str(chat.id), chat.title or chat.username or str(chat.id), False
    if message.from_user is not None:
        user = message.from_user
        return str(user.id), user.full_name or user.username or str(user.id), user.is_bot
    return None


def _topic_title(message: Message) -> str:
    target = message.reply_to_message
    if target is not None and target.forum_topic_created is not None:
        return target.forum_topic_created.name
    return ""


def message_to_inbound(message: Message, bot: BotIdentity) -> InboundMessage | None:
    """Translate one new message; None when it is not for the core (see module notes)."""
    chat_type = chat_type_of(message.chat)
    sender = _sender(message)
    if chat_type is None or sender is None or message.is_automatic_forward:
        return None
    user_id, user_name, from_bot = sender
    if from_bot:
        return None
    text = message_text(message)
    if text is None:
        return None
    chat_id = str(message.chat.id)
    thread_id = None
    reply_to = None
    mentioned = False
    title = topic = ""
    if chat_type == ChatType.GROUP:
        thread_id = topic_id(message)
        reply_to = str(message.message_id)  # group replies quote what they answer
        mentioned = is_addressed(message, bot)
        if mentioned:
            text = strip_leading_mention(text, bot.username)
        topic = _topic_title(message) if thread_id else ""
        title = _join(message.chat.title, f"/ {topic}" if topic else "")
    return InboundMessage(
        channel=CHANNEL,
        # Stable per Telegram message, so a redelivered update is recognised as a duplicate.
        message_id=f"{chat_id}:{message.message_id}",
        chat_type=chat_type,
        chat_id=chat_id,
        user_id=user_id,
        user_name=user_name,
        text=text,
        address=Address(CHANNEL, chat_id, thread_id=thread_id, reply_to=reply_to),
        thread_id=thread_id,
        mentioned=mentioned,
        chat_title=title,
        topic_title=topic,
        timestamp=message.date.timestamp(),
    )


def update_to_inbound(update: Update, bot: BotIdentity) -> InboundMessage | None:
    """Translate an update; only new messages count (edits and the rest are ignored)."""
    if update.message is None:
        return None
    return message_to_inbound(update.message, bot)


def names_from(sources: Iterable[str | None]) -> tuple[str, ...]:
    """Distinct, non-empty names in order (getMe first name, IDENTITY.md name, ...)."""
    seen: dict[str, str] = {}
    for name in sources:
        if name and name.strip() and name.strip().casefold() not in seen:
            seen[name.strip().casefold()] = name.strip()
    return tuple(seen.values())
