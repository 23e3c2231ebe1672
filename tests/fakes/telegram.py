"""Loopback fake of the Telegram Bot API: an aiohttp server on 127.0.0.1 that the real
python-telegram-bot talks to over HTTP, recording every call and serving queued updates."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import random
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

import pytest_asyncio
from aiohttp import web
from telegram import Bot
from telegram.constants import ChatAction, MessageLimit, ReactionEmoji
from telegram.ext import ApplicationBuilder

from tests.fakes.flood import (
    TELEGRAM_CHAT,
    TELEGRAM_GROUP,
    TELEGRAM_OVERALL,
    FloodControl,
    SlidingLimit,
    retry_after_seconds,
)

JSONDict = dict[str, Any]

DEFAULT_TOKEN = "123456:TEST-TOKEN"

# Real server texts, so code that matches on them (e.g. "not modified") is tested for real.
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup "
    "are exactly the same as a content and reply markup of the current content and reply "
    "markup of the message"
)
TOO_LONG = "Bad Request: message is too long"
QUERY_INVALID = "Bad Request: query is too old and response timeout expired or query ID is invalid"
BUTTON_DATA_INVALID = "Bad Request: BUTTON_DATA_INVALID"
# Bot API limits of inline keyboards and of the answer to a button press.
CALLBACK_DATA_MAX_BYTES = 64
ANSWER_TEXT_MAX = 200
# A press not answered within this is too old to answer (Telegram's client gives up).
CALLBACK_ANSWER_SECONDS = 15.0
TEXT_EMPTY = "Bad Request: message text is empty"
GETUPDATES_CONFLICT = (
    "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running"
)
WEBHOOK_CONFLICT = (
    "Conflict: can't use getUpdates method while webhook is active; "
    "use deleteWebhook to delete the webhook first"
)

_DEFAULT_DESCRIPTIONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    404: "Not Found",
    409: GETUPDATES_CONFLICT,
    500: "Internal Server Error",
    502: "Bad Gateway",
}

# PTB JSON-encodes every non-str value inside form fields, so numbers and bools arrive as
# text. These params are genuinely strings and must never be decoded, even if they look
# like JSON (a user can send the text "42").
_STRING_PARAMS = frozenset(
    {
        "text",
        "caption",
        "parse_mode",
        "action",
        "url",
        "secret_token",
        "callback_query_id",
        "inline_message_id",
        "business_connection_id",
        "language_code",
        "emoji",
        "description",
        "short_description",
        "name",
        "title",
        "query",
        "ip_address",
        "file_id",
    }
)
_JSON_SCALAR = re.compile(r"-?\d+(?:\.\d+)?|true|false|null")

_CHAT_ACTIONS = frozenset(a.value for a in ChatAction)
_REACTION_EMOJI = frozenset(e.value for e in ReactionEmoji)
_COMMAND_RE = re.compile(r"[a-z0-9_]{1,32}")

# Entities the server detects in user text on its own.
_AUTO_ENTITY_RES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("bot_command", re.compile(r"(?<!\S)/[A-Za-z0-9_]{1,32}(?:@[A-Za-z][A-Za-z0-9_]{3,31})?\b")),
    ("mention", re.compile(r"(?<![\w@/])@[A-Za-z][A-Za-z0-9_]{3,31}\b")),
    ("url", re.compile(r"https?://[^\s<>\"]+")),
)

# A valid 1x1 PNG, so code that hands photos to an image decoder or an LLM gets real bytes.
TINY_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)
FAKE_OGG = b"OggS\x00\x02" + b"\x00" * 58


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit Telegram uses for limits and entity offsets."""
    return len(text.encode("utf-16-le")) // 2


# --------------------------------------------------------------------------------------
# Formatting parsers: only as faithful as tests need (plain text, rough entities, errors).
# --------------------------------------------------------------------------------------


class EntityParseError(ValueError):
    """Markup the real server would reject with "can't parse entities"."""


class _Out:
    """Plain-text accumulator that tracks its length in UTF-16 units for entity offsets."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.pos = 0

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.pos += utf16_len(text)

    def text(self) -> str:
        return "".join(self.parts)


def _entity(kind: str, start: int, end: int, **extra: Any) -> JSONDict | None:
    if end <= start:
        return None  # Telegram drops empty entities
    return {"type": kind, "offset": start, "length": end - start, **extra}


def _byte_offset(src: str, index: int) -> int:
    return len(src[:index].encode())


_MDV2_RESERVED = frozenset("_*[]()~`>#+-=|{}.!")
_MDV2_NAMES = {
    "bold": "Bold",
    "italic": "Italic",
    "underline": "Underline",
    "strikethrough": "Strikethrough",
    "spoiler": "Spoiler",
}


def _mdv2_read_until(src: str, i: int, closer: str, what: str, start: int) -> tuple[str, int]:
    """Read escaped content up to `closer`; returns (content, index after closer)."""
    buf: list[str] = []
    n = len(src)
    while i < n:
        if src[i] == "\\" and i + 1 < n:
            buf.append(src[i + 1])
            i += 2
        elif src.startswith(closer, i):
            return "".join(buf), i + len(closer)
        else:
            buf.append(src[i])
            i += 1
    raise EntityParseError(
        f"Can't find end of {what} entity at byte offset {_byte_offset(src, start)}"
    )


def parse_markdown_v2(src: str) -> tuple[str, list[JSONDict]]:
    """Parse MarkdownV2 into (plain text, entities), raising EntityParseError like the server."""
    out = _Out()
    entities: list[JSONDict | None] = []
    open_marks: dict[str, tuple[int, int]] = {}
    links: list[tuple[int, int, bool]] = []
    quote: tuple[int, bool] | None = None
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        line_start = i == 0 or src[i - 1] == "\n"
        if c == "\\":
            if i + 1 == n:
                raise EntityParseError(
                    "Character '\\' is reserved and must be escaped with the preceding '\\'"
                )
            out.add(src[i + 1])
            i += 2
            continue
        if line_start and (c == ">" or src.startswith("**>", i)):
            expandable = c == "*"
            if quote is None:
                quote = (out.pos, expandable)
            i += 3 if expandable else 1
            continue
        if quote is not None and quote[1] and src.startswith("||", i):
            if i + 2 == n or src[i + 2] == "\n":
                i += 2  # closing mark of an expandable blockquote
                continue
        if c == "\n" and quote is not None and not src.startswith(">", i + 1):
            kind = "expandable_blockquote" if quote[1] else "blockquote"
            entities.append(_entity(kind, quote[0], out.pos))
            quote = None
        if c == "`":
            start = out.pos
            if src.startswith("```", i):
                body, j = _mdv2_read_until(src, i + 3, "```", "Pre", i)
                first, sep, rest = body.partition("\n")
                language = None
                if sep and re.fullmatch(r"[\w+#.-]*", first):
                    language, body = first or None, rest
                out.add(body)
                extra = {"language": language} if language else {}
                entities.append(_entity("pre", start, out.pos, **extra))
            else:
                body, j = _mdv2_read_until(src, i + 1, "`", "Code", i)
                out.add(body)
                entities.append(_entity("code", start, out.pos))
            i = j
            continue
        mark, width = None, 1
        if c == "*":
            mark = "bold"
        elif c == "_":
            mark, width = ("underline", 2) if src.startswith("__", i) else ("italic", 1)
        elif c == "~":
            mark = "strikethrough"
        elif src.startswith("||", i):
            mark, width = "spoiler", 2
        if mark is not None:
            if mark in open_marks:
                start, _ = open_marks.pop(mark)
                entities.append(_entity(mark, start, out.pos))
            else:
                open_marks[mark] = (out.pos, i)
            i += width
            continue
        if c == "[" or src.startswith("![", i):
            links.append((out.pos, i, c == "!"))
            i += 2 if c == "!" else 1
            continue
        if c == "]" and links:
            start, src_start, is_emoji = links.pop()
            if not src.startswith("(", i + 1):
                raise EntityParseError(
                    "Character ']' is reserved and must be escaped with the preceding '\\'"
                )
            url, i = _mdv2_read_until(src, i + 2, ")", "TextUrl", src_start)
            if is_emoji:
                emoji_id = url.partition("id=")[2]
                entities.append(_entity("custom_emoji", start, out.pos, custom_emoji_id=emoji_id))
            else:
                entities.append(_entity("text_link", start, out.pos, url=url))
            continue
        if c in _MDV2_RESERVED:
            raise EntityParseError(
                f"Character '{c}' is reserved and must be escaped with the preceding '\\'"
            )
        out.add(c)
        i += 1
    if quote is not None:
        kind = "expandable_blockquote" if quote[1] else "blockquote"
        entities.append(_entity(kind, quote[0], out.pos))
    if open_marks:
        mark, (_, src_start) = min(open_marks.items(), key=lambda kv: kv[1][1])
        raise EntityParseError(
            f"Can't find end of {_MDV2_NAMES[mark]} entity at byte offset "
            f"{_byte_offset(src, src_start)}"
        )
    if links:
        raise EntityParseError(
            f"Can't find end of TextUrl entity at byte offset {_byte_offset(src, links[0][1])}"
        )
    return out.text(), _sorted_entities(entities)


def parse_markdown_legacy(src: str) -> tuple[str, list[JSONDict]]:
    """Parse the legacy "Markdown" mode: *bold*, _italic_, `code`, ```pre```, [text](url)."""
    out = _Out()
    entities: list[JSONDict | None] = []
    i, n = 0, len(src)

    def unclosed(at: int) -> EntityParseError:
        return EntityParseError(
            f"Can't find end of the entity starting at byte offset {_byte_offset(src, at)}"
        )

    while i < n:
        c = src[i]
        if c == "\\" and i + 1 < n and src[i + 1] in "_*`[":
            out.add(src[i + 1])
            i += 2
            continue
        start = out.pos
        if c in "*_":
            j = src.find(c, i + 1)
            if j < 0:
                raise unclosed(i)
            out.add(src[i + 1 : j])
            entities.append(_entity("bold" if c == "*" else "italic", start, out.pos))
            i = j + 1
        elif c == "`":
            fence = "```" if src.startswith("```", i) else "`"
            j = src.find(fence, i + len(fence))
            if j < 0:
                raise unclosed(i)
            out.add(src[i + len(fence) : j])
            entities.append(_entity("pre" if len(fence) == 3 else "code", start, out.pos))
            i = j + len(fence)
        elif c == "[":
            j = src.find("](", i + 1)
            k = src.find(")", j + 2) if j >= 0 else -1
            if k < 0:
                raise unclosed(i)
            out.add(src[i + 1 : j])
            entities.append(_entity("text_link", start, out.pos, url=src[j + 2 : k]))
            i = k + 1
        else:
            out.add(c)
            i += 1
    return out.text(), _sorted_entities(entities)


_HTML_TAGS = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
    "span": "spoiler",
    "a": "text_link",
    "code": "code",
    "pre": "pre",
    "blockquote": "blockquote",
    "tg-emoji": "custom_emoji",
}


class _HtmlEntityParser(HTMLParser):
    def __init__(self, src: str) -> None:
        super().__init__(convert_charrefs=True)
        self.src = src
        self.out = _Out()
        self.stack: list[tuple[str, int, dict[str, str | None]]] = []
        self.entities: list[JSONDict | None] = []
        self._line_starts = [0]
        for m in re.finditer("\n", src):
            self._line_starts.append(m.end())

    def _offset(self) -> int:
        line, col = self.getpos()
        return _byte_offset(self.src, self._line_starts[line - 1] + col)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag not in _HTML_TAGS or (tag == "span" and attributes.get("class") != "tg-spoiler"):
            raise EntityParseError(f'Unsupported start tag "{tag}" at byte offset {self._offset()}')
        self.stack.append((tag, self.out.pos, attributes))

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1][0] != tag:
            expected = self.stack[-1][0] if self.stack else ""
            raise EntityParseError(
                f"Unmatched end tag at byte offset {self._offset()}, "
                f'expected "</{expected}>", found "</{tag}>"'
            )
        _, start, attrs = self.stack.pop()
        kind = _HTML_TAGS[tag]
        extra: JSONDict = {}
        if tag == "code" and self.stack and self.stack[-1][0] == "pre":
            # <pre><code class="language-x"> is one pre entity carrying a language.
            language = (attrs.get("class") or "").removeprefix("language-")
            if language:
                self.stack[-1][2]["_language"] = language
            return
        if tag == "pre" and attrs.get("_language"):
            extra["language"] = attrs["_language"]
        elif tag == "a":
            extra["url"] = attrs.get("href") or ""
        elif tag == "tg-emoji":
            extra["custom_emoji_id"] = attrs.get("emoji-id") or ""
        elif tag == "blockquote" and "expandable" in attrs:
            kind = "expandable_blockquote"
        self.entities.append(_entity(kind, start, self.out.pos, **extra))

    def handle_data(self, data: str) -> None:
        self.out.add(data)


def parse_html(src: str) -> tuple[str, list[JSONDict]]:
    """Parse Telegram's HTML subset into (plain text, entities)."""
    bare_lt = re.search(r"<(?![A-Za-z/])", src)
    if bare_lt:
        raise EntityParseError(
            f'Unsupported start tag "" at byte offset {_byte_offset(src, bare_lt.start())}'
        )
    parser = _HtmlEntityParser(src)
    parser.feed(src)
    parser.close()
    if parser.stack:
        raise EntityParseError(
            f'Can\'t find end tag corresponding to start tag "{parser.stack[0][0]}"'
        )
    return parser.out.text(), _sorted_entities(parser.entities)


def _sorted_entities(entities: list[JSONDict | None]) -> list[JSONDict]:
    found = [e for e in entities if e is not None]
    return sorted(found, key=lambda e: (e["offset"], -e["length"]))


def render_text(text: str, parse_mode: str | None) -> tuple[str, list[JSONDict]]:
    """What the server stores for `text` sent with `parse_mode`: (plain text, entities)."""
    mode = (parse_mode or "").lower()
    if not mode:
        return text, []
    if mode == "markdownv2":
        return parse_markdown_v2(text)
    if mode == "markdown":
        return parse_markdown_legacy(text)
    if mode == "html":
        return parse_html(text)
    raise _ApiError(400, f"Bad Request: unsupported parse_mode {parse_mode!r}")


def detect_entities(text: str) -> list[JSONDict]:
    """Entities the server adds to user text by itself: commands, @mentions and URLs."""
    found: list[JSONDict | None] = []
    for kind, pattern in _AUTO_ENTITY_RES:
        for m in pattern.finditer(text):
            start = utf16_len(text[: m.start()])
            found.append(_entity(kind, start, start + utf16_len(m.group())))
    return _sorted_entities(found)


# --------------------------------------------------------------------------------------
# Server plumbing
# --------------------------------------------------------------------------------------


class _ApiError(Exception):
    def __init__(self, status: int, description: str, parameters: JSONDict | None = None):
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters or {}

    def response(self) -> JSONDict:
        body: JSONDict = {"ok": False, "error_code": self.status, "description": self.description}
        if self.parameters:
            body["parameters"] = self.parameters
        return body


class Call(tuple[str, JSONDict]):
    """One API request the fake received; unpacks as ``(method, params)``.

    ``status`` and ``response`` are filled in once the fake has answered.
    """

    status: int | None
    response: JSONDict | None
    client: str  # the client's connection (host:port), to tell pollers apart
    at: float  # when it arrived (time.monotonic)

    def __new__(cls, method: str, params: JSONDict, client: str = "") -> Call:
        self = super().__new__(cls, (method, params))
        self.status = None
        self.response = None
        self.client = client
        self.at = time.monotonic()
        return self

    @property
    def method(self) -> str:
        return self[0]

    @property
    def params(self) -> JSONDict:
        return self[1]

    @property
    def ok(self) -> bool:
        return self.status == 200


@dataclass
class _Failure:
    method: str
    error: _ApiError
    remaining: int
    skip: int = 0  # calls to let through before failing


class _Signal:
    """Wake-all notification usable from sync code on the loop (unlike asyncio.Condition)."""

    def __init__(self) -> None:
        self._waiters: list[asyncio.Future[None]] = []

    def notify(self) -> None:
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(None)
        self._waiters.clear()

    async def wait(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await asyncio.wait({fut}, timeout=max(seconds, 0))
        finally:
            if fut in self._waiters:
                self._waiters.remove(fut)


def _decode_field(key: str, value: str) -> Any:
    if key in _STRING_PARAMS:
        return value
    if value[:1] in ("{", "[") or _JSON_SCALAR.fullmatch(value):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _message_kind(update: JSONDict) -> str | None:
    for key in (
        "message",
        "edited_message",
        "channel_post",
        "edited_channel_post",
        "business_message",
        "edited_business_message",
    ):
        if key in update:
            return key
    return None


def _update_type(update: JSONDict) -> str:
    return next((k for k in update if k != "update_id"), "")


def _checked_markup(markup: Any) -> JSONDict:
    """An inline keyboard as the server keeps it, refused as the server would: every
    button needs text and exactly one action; callback data is 1-64 bytes."""
    if not isinstance(markup, dict):
        raise _ApiError(400, "Bad Request: can't parse reply keyboard markup JSON object")
    rows = markup.get("inline_keyboard")
    if rows is None:
        return markup  # a reply keyboard or a keyboard removal: not checked here
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise _ApiError(400, "Bad Request: can't parse inline keyboard button")
    actions = ("callback_data", "url", "switch_inline_query", "web_app", "copy_text")
    for row in rows:
        for button in row:
            if not isinstance(button, dict) or not str(button.get("text") or "").strip():
                raise _ApiError(
                    400, "Bad Request: text buttons are unallowed in the inline keyboard"
                )
            if sum(1 for action in actions if action in button) != 1:
                raise _ApiError(400, "Bad Request: can't parse inline keyboard button")
            data = button.get("callback_data")
            if data is not None and not 1 <= len(str(data).encode()) <= CALLBACK_DATA_MAX_BYTES:
                raise _ApiError(400, BUTTON_DATA_INVALID)
    return markup


# The cloud Bot API hands out files up to 20 MB; getFile refuses larger ones.
GETFILE_MAX_BYTES = 20 * 1024 * 1024
# Uploads: photos up to 10 MB, other files up to 50 MB.
PHOTO_MAX_BYTES = 10 * 1024 * 1024
UPLOAD_MAX_BYTES = 50 * 1024 * 1024


class FakeTelegram:
    """Telegram Bot API server for tests; use ``async with FakeTelegram() as fake`` or the
    ``fake_telegram`` fixture, and point PTB at it with ``fake.app_builder()``."""

    def __init__(
        self,
        token: str = DEFAULT_TOKEN,
        bot_username: str = "krill_bot",
        bot_id: int = 999,
        *,
        bot_first_name: str = "Krill",
        can_read_all_group_messages: bool = False,
        max_poll_timeout: float = 50.0,
    ) -> None:
        self.token = token
        self.bot_username = bot_username
        self.bot_id = bot_id
        self.bot_first_name = bot_first_name
        self.can_read_all_group_messages = can_read_all_group_messages
        self.max_poll_timeout = max_poll_timeout

        self.calls: list[Call] = []
        # Keyed by (chat_id, message_id); holds user and bot messages as the server sees them.
        self.messages: dict[tuple[int, int], JSONDict] = {}
        self.deleted: list[tuple[int, int]] = []
        self.chats: dict[int, JSONDict] = {}
        self.reactions: dict[tuple[int, int], list[JSONDict]] = {}
        self.commands: dict[tuple[str, str], list[JSONDict]] = {}
        self.files: dict[str, tuple[JSONDict, bytes]] = {}
        # Photos and documents the bot uploaded: (message as the API returned it, bytes).
        self.sent_media: list[tuple[JSONDict, bytes]] = []
        # Paths asked of the file endpoint (/file/bot<token>/<path>), in order.
        self.file_requests: list[str] = []
        self.webhook: JSONDict | None = None
        self.allowed_updates: list[str] = []

        self._updates: list[JSONDict] = []
        self._next_update_id = 10_001
        self._message_ids: dict[int, int] = {}
        self._bot_message_order: list[tuple[int, int]] = []
        self._failures: list[_Failure] = []
        self._late: dict[str, list[float]] = {}  # see answer_late
        self.flood: FloodControl | None = None  # see enforce_flood_limits
        self._random_failure: tuple[str, float, random.Random, int, str] | None = None
        self._file_seq = itertools.count(1)
        self._callback_seq = itertools.count(1)
        # Button presses handed out (callback query id -> when), and how each was answered.
        self.callback_queries: dict[str, float] = {}
        self.callback_answers: dict[str, JSONDict] = {}
        self._poll_generation = 0
        # 409 "terminated by other getUpdates request" answers a client was still waiting for.
        self.poll_conflicts = 0
        self._call_signal = _Signal()
        self._update_signal = _Signal()
        self._closing = False
        self._runner: web.AppRunner | None = None
        self._url: str | None = None

        self._methods: dict[str, Callable[[JSONDict], Any]] = {
            "getme": self._get_me,
            "deletewebhook": self._delete_webhook,
            "setwebhook": self._set_webhook,
            "getwebhookinfo": self._get_webhook_info,
            "getupdates": self._get_updates,
            "sendmessage": self._send_message,
            "editmessagetext": self._edit_message_text,
            "deletemessage": self._delete_message,
            "deletemessages": self._delete_messages,
            "sendchataction": self._send_chat_action,
            "setmycommands": self._set_my_commands,
            "getmycommands": self._get_my_commands,
            "deletemycommands": self._delete_my_commands,
            "sendmessagedraft": self._send_message_draft,
            "setmessagereaction": self._set_message_reaction,
            "answercallbackquery": self._answer_callback_query,
            "editmessagereplymarkup": self._edit_message_reply_markup,
            "getchat": self._get_chat,
            "getfile": self._get_file,
            "sendphoto": self._send_photo,
            "senddocument": self._send_document,
        }

    # ---- lifecycle -------------------------------------------------------------------

    async def start(self) -> str:
        """Start serving on a free loopback port; returns the API root ``http://127.0.0.1:P``."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        # Long polls are woken in stop(), so a short grace period is plenty.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self._url = f"http://127.0.0.1:{port}"
        self._closing = False
        return self._url

    async def stop(self) -> None:
        self._closing = True
        self._update_signal.notify()
        self._call_signal.notify()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeTelegram:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("FakeTelegram is not started")
        return self._url

    @property
    def base_url(self) -> str:
        """Value for ``ApplicationBuilder.base_url`` (PTB appends the token)."""
        return f"{self.url}/bot"

    @property
    def base_file_url(self) -> str:
        return f"{self.url}/file/bot"

    def app_builder(self, token: str | None = None) -> ApplicationBuilder:
        """An ApplicationBuilder already pointed at this fake; chain more options as needed."""
        return (
            ApplicationBuilder()
            .token(token or self.token)
            .base_url(self.base_url)
            .base_file_url(self.base_file_url)
        )

    def make_bot(self, token: str | None = None) -> Bot:
        return Bot(token or self.token, base_url=self.base_url, base_file_url=self.base_file_url)

    # ---- recording helpers -----------------------------------------------------------

    def calls_to(self, method: str) -> list[JSONDict]:
        """Params of every call to `method` (case-insensitive), failed ones included."""
        wanted = method.lower()
        return [c.params for c in self.calls if c.method.lower() == wanted]

    def sent_texts(self, chat_id: int | str | None = None) -> list[str]:
        """`text` params, as the bot sent them, of sendMessage calls that succeeded."""
        return [
            c.params.get("text", "")
            for c in self.calls
            if c.method.lower() == "sendmessage"
            and c.ok
            and (chat_id is None or c.params.get("chat_id") == chat_id)
        ]

    def pollers(self, since_call: int = 0) -> set[str]:
        """The clients (connections) that called getUpdates, from call number `since_call`
        on (take `len(fake.calls)` as a mark). A poller keeps its connection between polls."""
        return {c.client for c in self.calls[since_call:] if c.method.lower() == "getupdates"}

    def bot_messages(self, chat_id: int | None = None) -> list[JSONDict]:
        """Current state (after edits, minus deletions) of messages the bot sent, in order."""
        return [
            self.messages[key]
            for key in self._bot_message_order
            if key in self.messages and (chat_id is None or key[0] == chat_id)
        ]

    async def wait_for(
        self,
        method: str,
        count: int = 1,
        timeout: float = 5.0,
        predicate: Callable[[JSONDict], bool] | None = None,
        *,
        successful: bool = False,
    ) -> list[JSONDict]:
        """Wait until `count` calls to `method` matching `predicate(params)` have arrived.

        Counts from the start of `calls` (clear it to count afresh) and returns the params
        of all matching calls.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        wanted = method.lower()
        while True:
            matched = [
                c.params
                for c in self.calls
                if c.method.lower() == wanted
                and (not successful or c.ok)
                and (predicate is None or predicate(c.params))
            ]
            if len(matched) >= count:
                return matched
            remaining = deadline - loop.time()
            if remaining <= 0 or self._closing:
                raise AssertionError(
                    f"timed out after {timeout}s waiting for {count} {method} call(s); "
                    f"{len(matched)} matched. Calls so far:\n{self.dump_calls()}"
                )
            await self._call_signal.wait(remaining)

    def dump_calls(self, last: int = 40) -> str:
        lines = []
        for c in self.calls[-last:]:
            params = {
                k: (v[:80] + "…" if isinstance(v, str) and len(v) > 80 else v)
                for k, v in c.params.items()
            }
            lines.append(f"  {c.method} -> {c.status} {params}")
        return "\n".join(lines) or "  (none)"

    # ---- failure injection -----------------------------------------------------------

    def fail_next(
        self,
        method: str,
        status: int,
        description: str | None = None,
        *,
        retry_after: int | None = None,
        migrate_to_chat_id: int | None = None,
        times: int = 1,
        after: int = 0,
    ) -> None:
        """Answer the next `times` calls to `method` with a Bot API error envelope (after
        letting `after` calls through)."""
        if description is None:
            if status == 429:
                description = f"Too Many Requests: retry after {retry_after or 1}"
            else:
                description = _DEFAULT_DESCRIPTIONS.get(status, "Internal Server Error")
        parameters: JSONDict = {}
        if retry_after is not None:
            parameters["retry_after"] = retry_after
        if migrate_to_chat_id is not None:
            parameters["migrate_to_chat_id"] = migrate_to_chat_id
        error = _ApiError(status, description, parameters)
        self._failures.append(_Failure(method.lower(), error, times, after))

    def answer_late(self, method: str, *seconds: float) -> None:
        """Carry out each of the next calls to `method` at once (a message is sent and shows
        in the chat, as on the real platform) but answer it only after the next of
        `seconds`, whether or not the client is still waiting."""
        self._late.setdefault(method.lower(), []).extend(seconds)

    def fail_randomly(self, method: str, rate: float, status: int = 502, seed: int = 0) -> None:
        """Answer a share `rate` of the calls to `method` with `status` (a flaky server)."""
        description = _DEFAULT_DESCRIPTIONS.get(status, "Internal Server Error")
        self._random_failure = (method.lower(), rate, random.Random(seed), status, description)

    def enforce_flood_limits(
        self,
        chat: SlidingLimit = TELEGRAM_CHAT,
        group: SlidingLimit = TELEGRAM_GROUP,
        overall: SlidingLimit = TELEGRAM_OVERALL,
    ) -> FloodControl:
        """From now on, answer message sends and edits over Telegram's flood limits with
        429 and `retry_after`; `flood.refused` counts those answers."""
        self.flood = FloodControl({"chat": chat, "group": group, "overall": overall})
        return self.flood

    def _check_flood(self, method: str, params: JSONDict) -> None:
        counted = method.startswith(("send", "edit")) and method != "sendchataction"
        if self.flood is None or not counted or "chat_id" not in params:
            return
        chat = params["chat_id"]
        keys: dict[str, Any] = {"chat": chat, "overall": "bot"}
        if isinstance(chat, str) or chat < 0:
            keys["group"] = chat
        wait = self.flood.admit(keys)
        if wait is not None:
            seconds = retry_after_seconds(wait)
            raise _ApiError(
                429, f"Too Many Requests: retry after {seconds}", {"retry_after": seconds}
            )

    def fail_next_getupdates_conflict(self, times: int = 1) -> None:
        self.fail_next("getUpdates", 409, GETUPDATES_CONFLICT, times=times)

    def clear_failures(self) -> None:
        self._failures.clear()

    def _take_failure(self, method: str) -> _ApiError | None:
        if self._random_failure is not None:
            flaky, rate, dice, status, description = self._random_failure
            if flaky == method and dice.random() < rate:
                return _ApiError(status, description, {})
        for failure in self._failures:
            if failure.method == method:
                if failure.skip > 0:
                    failure.skip -= 1
                    return None
                failure.remaining -= 1
                if failure.remaining <= 0:
                    self._failures.remove(failure)
                return failure.error
        return None

    # ---- HTTP ------------------------------------------------------------------------

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        file_match = re.fullmatch(r"/file/bot([^/]+)/(.+)", path)
        if file_match and request.method == "GET":
            self.file_requests.append(file_match.group(2))
            return self._serve_file(file_match.group(1), file_match.group(2))
        api_match = re.fullmatch(r"/bot([^/]+)/([A-Za-z0-9_]+)/?", path)
        if api_match is None:
            return self._error_response(_ApiError(404, "Not Found"))
        token, method = api_match.groups()
        if token != self.token:
            return self._error_response(_ApiError(401, "Unauthorized"))

        params = await self._read_params(request)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        call = Call(method, params, f"{peer[0]}:{peer[1]}" if peer else "")
        self.calls.append(call)
        late = self._late.get(method.lower())
        delay = late.pop(0) if late else 0.0
        try:
            result = await self._handle(method, params)
        except _ApiError as exc:
            call.status, call.response = exc.status, exc.response()
            if exc.description == GETUPDATES_CONFLICT and request.transport is not None:
                # A poll whose client is gone (it gave up, or was killed) tells nobody.
                self.poll_conflicts += 1
        else:
            call.status, call.response = 200, {"ok": True, "result": result}
        # Notify only once the outcome is recorded, so waiters can trust Call.status.
        self._call_signal.notify()
        if delay:
            await asyncio.sleep(delay)  # done; only the answer is late
        return web.json_response(call.response, status=call.status)

    async def _handle(self, method: str, params: JSONDict) -> Any:
        self._check_flood(method.lower(), params)
        failure = self._take_failure(method.lower())
        if failure is not None:
            raise failure
        handler = self._methods.get(method.lower())
        if handler is None:
            raise _ApiError(404, "Not Found")
        result = handler(params)
        if asyncio.iscoroutine(result):
            result = await result
        return result

    @staticmethod
    def _error_response(error: _ApiError) -> web.Response:
        return web.json_response(error.response(), status=error.status)

    @staticmethod
    async def _read_params(request: web.Request) -> JSONDict:
        params: JSONDict = {k: _decode_field(k, v) for k, v in request.query.items()}
        if not request.body_exists:
            return params
        if request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
            form = await request.post()
            for key, value in form.items():
                if isinstance(value, web.FileField):
                    params[key] = value.file.read()
                    params[f"{key}.filename"] = value.filename
                else:
                    params[key] = _decode_field(key, str(value))
            return params
        raw = await request.read()
        if raw.strip():
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            if isinstance(body, dict):
                params.update(body)
        return params

    def _serve_file(self, token: str, file_path: str) -> web.Response:
        if token != self.token:
            return self._error_response(_ApiError(401, "Unauthorized"))
        for meta, data in self.files.values():
            if meta["file_path"] == file_path:
                return web.Response(body=data, content_type="application/octet-stream")
        return self._error_response(_ApiError(404, "Not Found"))

    # ---- state helpers ---------------------------------------------------------------

    @property
    def next_update_id(self) -> int:
        return self._next_update_id

    @property
    def pending_updates(self) -> list[JSONDict]:
        """Updates queued and not yet acknowledged by a getUpdates offset."""
        return list(self._updates)

    def _take_update_id(self) -> int:
        update_id = self._next_update_id
        self._next_update_id += 1
        return update_id

    def _take_message_id(self, chat_id: int) -> int:
        message_id = self._message_ids.get(chat_id, 0) + 1
        self._message_ids[chat_id] = message_id
        return message_id

    def _register_message(self, message: JSONDict) -> None:
        chat = message["chat"]
        chat_id, message_id = chat["id"], message["message_id"]
        self.chats[chat_id] = chat
        self.messages[(chat_id, message_id)] = message
        # Hand-built updates may carry any id; keep our counter ahead of them.
        self._message_ids[chat_id] = max(self._message_ids.get(chat_id, 0), message_id)

    @property
    def bot_user(self) -> JSONDict:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": self.bot_first_name,
            "username": self.bot_username,
        }

    def _resolve_chat(self, chat_ref: Any) -> JSONDict:
        if chat_ref is None or chat_ref == "":
            raise _ApiError(400, "Bad Request: chat_id is empty")
        if isinstance(chat_ref, str) and chat_ref.startswith("@"):
            for chat in self.chats.values():
                if chat.get("username", "").lower() == chat_ref[1:].lower():
                    return chat
            raise _ApiError(400, "Bad Request: chat not found")
        try:
            chat_id = int(chat_ref)
        except (TypeError, ValueError):
            raise _ApiError(400, "Bad Request: chat not found") from None
        if chat_id in self.chats:
            return self.chats[chat_id]
        # Unknown ids get the type their numbering implies, so tests can send anywhere.
        if chat_id > 0:
            chat = {"id": chat_id, "type": "private", "first_name": "User"}
        elif str(chat_id).startswith("-100"):
            chat = {"id": chat_id, "type": "supergroup", "title": f"Group {chat_id}"}
        else:
            chat = {"id": chat_id, "type": "group", "title": f"Group {chat_id}"}
        self.chats[chat_id] = chat
        return chat

    def _render(self, params: JSONDict, *, allow_empty: bool = False) -> tuple[str, list[JSONDict]]:
        text = params.get("text")
        if text is None or text == "":
            if allow_empty:
                return "", []
            raise _ApiError(400, TEXT_EMPTY)
        text = str(text)
        entities = params.get("entities")
        if entities:
            plain, parsed = text, list(entities)
        else:
            try:
                plain, parsed = render_text(text, params.get("parse_mode"))
            except EntityParseError as exc:
                raise _ApiError(400, f"Bad Request: can't parse entities: {exc}") from None
        if not plain.strip() and not allow_empty:
            raise _ApiError(400, TEXT_EMPTY)
        if utf16_len(plain) > MessageLimit.MAX_TEXT_LENGTH:
            raise _ApiError(400, TOO_LONG)
        return plain, parsed

    def _reply_target(self, chat_id: int, params: JSONDict) -> JSONDict | None:
        reply = params.get("reply_parameters")
        message_id = None
        if isinstance(reply, dict):
            message_id = reply.get("message_id")
            chat_id = reply.get("chat_id", chat_id)
        elif params.get("reply_to_message_id") is not None:
            message_id = params["reply_to_message_id"]
        if message_id is None:
            return None
        target = self.messages.get((int(chat_id), int(message_id)))
        if target is None:
            return None
        # The server never nests replies more than one level deep.
        return {k: v for k, v in target.items() if k != "reply_to_message"}

    # ---- API methods -----------------------------------------------------------------

    def _get_me(self, _params: JSONDict) -> JSONDict:
        return {
            **self.bot_user,
            "can_join_groups": True,
            "can_read_all_group_messages": self.can_read_all_group_messages,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }

    def _delete_webhook(self, params: JSONDict) -> bool:
        self.webhook = None
        if params.get("drop_pending_updates"):
            self._updates.clear()
        return True

    def _set_webhook(self, params: JSONDict) -> bool:
        url = params.get("url") or ""
        if not url:
            return self._delete_webhook(params)
        if not url.startswith("https://") and not url.startswith("http://"):
            raise _ApiError(400, "Bad Request: bad webhook: An HTTPS URL must be provided")
        self.webhook = {
            "url": url,
            "secret_token": params.get("secret_token"),
            "allowed_updates": params.get("allowed_updates"),
            "max_connections": params.get("max_connections", 40),
        }
        if params.get("drop_pending_updates"):
            self._updates.clear()
        return True

    def _get_webhook_info(self, _params: JSONDict) -> JSONDict:
        info: JSONDict = {
            "url": self.webhook["url"] if self.webhook else "",
            "has_custom_certificate": False,
            "pending_update_count": len(self._updates),
        }
        if self.webhook:
            info["max_connections"] = self.webhook["max_connections"]
            if self.webhook["allowed_updates"]:
                info["allowed_updates"] = self.webhook["allowed_updates"]
        return info

    async def _get_updates(self, params: JSONDict) -> list[JSONDict]:
        if self.webhook:
            raise _ApiError(409, WEBHOOK_CONFLICT)
        # A newer getUpdates terminates an older pending one, as on the real server.
        self._poll_generation += 1
        generation = self._poll_generation
        self._update_signal.notify()

        offset = int(params.get("offset") or 0)
        limit = min(max(int(params.get("limit") or 100), 1), 100)
        timeout = min(max(float(params.get("timeout") or 0), 0.0), self.max_poll_timeout)
        if params.get("allowed_updates") is not None:
            self.allowed_updates = list(params["allowed_updates"])

        if offset < 0:
            self._updates = self._updates[offset:]
        elif offset:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]

        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if generation != self._poll_generation:
                # Cut off, even with updates waiting: those go to the newer request.
                raise _ApiError(409, GETUPDATES_CONFLICT)
            if self.allowed_updates:
                # Updates of types nobody asked for are dropped, not kept for later.
                self._updates = [
                    u for u in self._updates if _update_type(u) in self.allowed_updates
                ]
            if self._updates:
                return [dict(u) for u in self._updates[:limit]]
            remaining = deadline - loop.time()
            if remaining <= 0 or self._closing:
                return []
            await self._update_signal.wait(remaining)

    def _send_message(self, params: JSONDict) -> JSONDict:
        chat = self._resolve_chat(params.get("chat_id"))
        text, entities = self._render(params)
        message: JSONDict = {
            "message_id": self._take_message_id(chat["id"]),
            "from": self.bot_user,
            "chat": chat,
            "date": int(time.time()),
            "text": text,
        }
        if entities:
            message["entities"] = entities
        thread_id = params.get("message_thread_id")
        if thread_id is not None:
            message["message_thread_id"] = int(thread_id)
            if chat.get("is_forum"):
                message["is_topic_message"] = True
        reply = self._reply_target(chat["id"], params)
        if reply is not None:
            message["reply_to_message"] = reply
        if params.get("reply_markup") is not None:
            message["reply_markup"] = _checked_markup(params["reply_markup"])
        if params.get("link_preview_options") is not None:
            message["link_preview_options"] = params["link_preview_options"]
        self._register_message(message)
        self._bot_message_order.append((chat["id"], message["message_id"]))
        return message

    def _upload(self, params: JSONDict, field: str) -> tuple[JSONDict, bytes]:
        """A sendPhoto/sendDocument: the file must be uploaded (multipart) or a known file_id."""
        chat = self._resolve_chat(params.get("chat_id"))
        value = params.get(field)
        if isinstance(value, bytes):
            data = value
        elif isinstance(value, str) and value in self.files:
            data = self.files[value][1]
        else:
            raise _ApiError(400, f"Bad Request: there is no {field} in the request")
        if not data:
            raise _ApiError(400, "Bad Request: file must be non-empty")
        limit = PHOTO_MAX_BYTES if field == "photo" else UPLOAD_MAX_BYTES
        if len(data) > limit:
            raise _ApiError(413, "Request Entity Too Large")
        message: JSONDict = {
            "message_id": self._take_message_id(chat["id"]),
            "from": self.bot_user,
            "chat": chat,
            "date": int(time.time()),
        }
        if params.get("caption"):
            message["caption"] = str(params["caption"])
        thread_id = params.get("message_thread_id")
        if thread_id is not None:
            message["message_thread_id"] = int(thread_id)
        self._register_message(message)
        return message, data

    def _send_photo(self, params: JSONDict) -> JSONDict:
        message, data = self._upload(params, "photo")
        meta = self.add_file(data, folder="photos", suffix=".jpg")
        message["photo"] = [
            {k: meta[k] for k in ("file_id", "file_unique_id", "file_size")}
            | {"width": 1, "height": 1}
        ]
        self.sent_media.append((message, data))
        return message

    def _send_document(self, params: JSONDict) -> JSONDict:
        message, data = self._upload(params, "document")
        meta = self.add_file(data)
        message["document"] = {k: meta[k] for k in ("file_id", "file_unique_id", "file_size")}
        message["document"]["file_name"] = params.get("document.filename") or "file"
        self.sent_media.append((message, data))
        return message

    def _edit_message_text(self, params: JSONDict) -> JSONDict | bool:
        if params.get("inline_message_id"):
            self._render(params)
            return True
        chat = self._resolve_chat(params.get("chat_id"))
        key = (chat["id"], int(params.get("message_id") or 0))
        message = self.messages.get(key)
        if message is None:
            raise _ApiError(400, "Bad Request: message to edit not found")
        if message.get("from", {}).get("id") != self.bot_id or "text" not in message:
            raise _ApiError(400, "Bad Request: message can't be edited")
        text, entities = self._render(params)
        markup = params.get("reply_markup")
        if markup is not None:
            markup = _checked_markup(markup)
        if (
            text == message["text"]
            and entities == message.get("entities", [])
            and markup == message.get("reply_markup")
        ):
            raise _ApiError(400, NOT_MODIFIED)
        edited = {**message, "text": text, "edit_date": int(time.time())}
        edited.pop("entities", None)
        if entities:
            edited["entities"] = entities
        edited.pop("reply_markup", None)
        if markup is not None:
            edited["reply_markup"] = markup
        self.messages[key] = edited
        return edited

    def _delete_message(self, params: JSONDict) -> bool:
        chat = self._resolve_chat(params.get("chat_id"))
        key = (chat["id"], int(params.get("message_id") or 0))
        if self.messages.pop(key, None) is None:
            raise _ApiError(400, "Bad Request: message to delete not found")
        self.deleted.append(key)
        return True

    def _delete_messages(self, params: JSONDict) -> bool:
        chat = self._resolve_chat(params.get("chat_id"))
        for message_id in params.get("message_ids") or []:
            key = (chat["id"], int(message_id))
            if self.messages.pop(key, None) is not None:
                self.deleted.append(key)
        return True

    def _send_chat_action(self, params: JSONDict) -> bool:
        self._resolve_chat(params.get("chat_id"))
        if params.get("action") not in _CHAT_ACTIONS:
            raise _ApiError(400, "Bad Request: wrong parameter action in request")
        return True

    @staticmethod
    def _commands_key(params: JSONDict) -> tuple[str, str]:
        scope = params.get("scope") or {"type": "default"}
        return json.dumps(scope, sort_keys=True), str(params.get("language_code") or "")

    def _set_my_commands(self, params: JSONDict) -> bool:
        commands = params.get("commands")
        if not isinstance(commands, list) or len(commands) > 100:
            raise _ApiError(400, "Bad Request: commands are invalid")
        for cmd in commands:
            if not _COMMAND_RE.fullmatch(str(cmd.get("command", ""))):
                raise _ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
            if not 1 <= len(str(cmd.get("description", ""))) <= 256:
                raise _ApiError(400, "Bad Request: BOT_COMMAND_DESCRIPTION_INVALID")
        self.commands[self._commands_key(params)] = [
            {"command": c["command"], "description": c["description"]} for c in commands
        ]
        return True

    def _get_my_commands(self, params: JSONDict) -> list[JSONDict]:
        return list(self.commands.get(self._commands_key(params), []))

    def _delete_my_commands(self, params: JSONDict) -> bool:
        self.commands.pop(self._commands_key(params), None)
        return True

    def _send_message_draft(self, params: JSONDict) -> bool:
        chat = self._resolve_chat(params.get("chat_id"))
        if chat["type"] != "private":
            raise _ApiError(400, "Bad Request: TEXTDRAFT_PEER_INVALID")
        if not params.get("draft_id"):
            raise _ApiError(400, "Bad Request: draft_id must be non-zero")
        self._render(params, allow_empty=True)
        return True

    def _set_message_reaction(self, params: JSONDict) -> bool:
        chat = self._resolve_chat(params.get("chat_id"))
        key = (chat["id"], int(params.get("message_id") or 0))
        if key not in self.messages:
            raise _ApiError(400, "Bad Request: message to react not found")
        reaction = params.get("reaction") or []
        for item in reaction:
            if item.get("type") == "emoji" and item.get("emoji") not in _REACTION_EMOJI:
                raise _ApiError(400, "Bad Request: REACTION_INVALID")
        self.reactions[key] = list(reaction)
        return True

    def _answer_callback_query(self, params: JSONDict) -> bool:
        query_id = str(params.get("callback_query_id") or "")
        issued = self.callback_queries.get(query_id)
        # A query is answered once, and only while the person's app still waits for it.
        if issued is None or query_id in self.callback_answers:
            raise _ApiError(400, QUERY_INVALID)
        if time.monotonic() - issued > CALLBACK_ANSWER_SECONDS:
            raise _ApiError(400, QUERY_INVALID)
        if len(str(params.get("text") or "")) > ANSWER_TEXT_MAX:
            raise _ApiError(400, "Bad Request: MESSAGE_TOO_LONG")
        self.callback_answers[query_id] = dict(params)
        return True

    def _edit_message_reply_markup(self, params: JSONDict) -> JSONDict:
        chat = self._resolve_chat(params.get("chat_id"))
        key = (chat["id"], int(params.get("message_id") or 0))
        message = self.messages.get(key)
        if message is None:
            raise _ApiError(400, "Bad Request: message to edit not found")
        if message.get("from", {}).get("id") != self.bot_id:
            raise _ApiError(400, "Bad Request: message can't be edited")
        markup = params.get("reply_markup")
        if markup is not None:
            markup = _checked_markup(markup)
        if markup == message.get("reply_markup"):
            raise _ApiError(400, NOT_MODIFIED)
        edited = {**message, "edit_date": int(time.time())}
        edited.pop("reply_markup", None)
        if markup is not None:
            edited["reply_markup"] = markup
        self.messages[key] = edited
        return edited

    def _get_chat(self, params: JSONDict) -> JSONDict:
        ref = params.get("chat_id")
        known = isinstance(ref, str) and ref.startswith("@")
        if not known and (not isinstance(ref, int) or ref not in self.chats):
            raise _ApiError(400, "Bad Request: chat not found")
        chat = self._resolve_chat(ref)
        return {
            **chat,
            "accent_color_id": 0,
            "max_reaction_count": 11,
            "accepted_gift_types": {
                "unlimited_gifts": False,
                "limited_gifts": False,
                "unique_gifts": False,
                "premium_subscription": False,
                "gifts_from_channels": False,
            },
        }

    def _get_file(self, params: JSONDict) -> JSONDict:
        entry = self.files.get(str(params.get("file_id") or ""))
        if entry is None:
            raise _ApiError(400, "Bad Request: invalid file_id")
        if entry[0]["file_size"] > GETFILE_MAX_BYTES:
            raise _ApiError(400, "Bad Request: file is too big")
        return dict(entry[0])

    # ---- files -----------------------------------------------------------------------

    def add_file(
        self,
        data: bytes,
        *,
        folder: str = "documents",
        suffix: str = "",
        file_path: str | None = None,
    ) -> JSONDict:
        """Register downloadable bytes; returns the File dict (file_id, file_path, ...).
        `file_path` replaces the path getFile answers with (a hostile or misconfigured
        server naming, say, a file on the bot's own disk)."""
        n = next(self._file_seq)
        meta = {
            "file_id": f"FAKE{folder[:3].upper()}{n:04d}{uuid.uuid4().hex[:12]}",
            "file_unique_id": f"U{n:06d}",
            "file_size": len(data),
            "file_path": file_path or f"{folder}/file_{n}{suffix}",
        }
        self.files[meta["file_id"]] = (meta, data)
        return meta

    # ---- update builders -------------------------------------------------------------

    def push_update(self, update: JSONDict) -> JSONDict:
        """Queue an update for getUpdates (assigning an update_id if missing)."""
        if "update_id" not in update:
            update["update_id"] = self._take_update_id()
        self._next_update_id = max(self._next_update_id, update["update_id"] + 1)
        kind = _message_kind(update)
        if kind is not None:
            self._register_message(update[kind])
        self._updates.append(update)
        self._updates.sort(key=lambda u: u["update_id"])
        self._update_signal.notify()
        return update

    @staticmethod
    def _user(
        user_id: int, first_name: str, username: str | None, last_name: str | None = None
    ) -> JSONDict:
        user: JSONDict = {"id": user_id, "is_bot": False, "first_name": first_name}
        if last_name:
            user["last_name"] = last_name
        if username:
            user["username"] = username
        return user

    def _chat(
        self,
        chat_id: int,
        *,
        group: bool,
        user: JSONDict,
        chat_type: str = "supergroup",
        is_forum: bool = False,
        title: str = "Test Group",
    ) -> JSONDict:
        if not group:
            chat: JSONDict = {"id": chat_id, "type": "private", "first_name": user["first_name"]}
            for optional in ("last_name", "username"):
                if optional in user:
                    chat[optional] = user[optional]
        else:
            chat = {"id": chat_id, "type": chat_type, "title": title}
            if is_forum:
                chat["is_forum"] = True
        self.chats[chat_id] = chat
        return chat

    def _base_message(self, chat: JSONDict, user: JSONDict, **fields: Any) -> JSONDict:
        message: JSONDict = {
            "message_id": self._take_message_id(chat["id"]),
            "from": user,
            "chat": chat,
            "date": int(time.time()),
        }
        message.update({k: v for k, v in fields.items() if v is not None})
        return message

    def _with_text(self, message: JSONDict, text: str, field: str = "text") -> JSONDict:
        message[field] = text
        entities = detect_entities(text)
        if entities:
            message["entities" if field == "text" else "caption_entities"] = entities
        return message

    def _wrap(self, message: JSONDict, kind: str = "message") -> JSONDict:
        self._register_message(message)
        return {"update_id": self._take_update_id(), kind: message}

    def _latest_bot_message(self, chat: JSONDict, thread_id: int | None) -> JSONDict:
        for chat_id, message_id in reversed(self._bot_message_order):
            found = self.messages.get((chat_id, message_id))
            if found and chat_id == chat["id"] and found.get("message_thread_id") == thread_id:
                return {k: v for k, v in found.items() if k != "reply_to_message"}
        # No real bot message yet: invent an earlier one so the reply has something to point at.
        earlier = self._base_message(chat, self.bot_user, text="Earlier reply from the bot")
        if thread_id is not None:
            earlier["message_thread_id"] = thread_id
            if chat.get("is_forum"):
                earlier["is_topic_message"] = True
        self._register_message(earlier)
        self._bot_message_order.append((chat["id"], earlier["message_id"]))
        return earlier

    def _topic_root(self, chat: JSONDict, user: JSONDict, thread_id: int) -> JSONDict:
        existing = self.messages.get((chat["id"], thread_id))
        if existing and "forum_topic_created" in existing:
            return existing
        root = {
            "message_id": thread_id,
            "from": user,
            "chat": chat,
            "date": int(time.time()),
            "message_thread_id": thread_id,
            "is_topic_message": True,
            "forum_topic_created": {"name": f"Topic {thread_id}", "icon_color": 7322096},
        }
        self._register_message(root)
        return root

    def _placement(
        self,
        message: JSONDict,
        user: JSONDict,
        *,
        reply_to_bot: bool,
        thread_id: int | None,
        topic_message: bool,
    ) -> None:
        chat = message["chat"]
        if topic_message:
            if thread_id is None:
                thread_id = self._take_message_id(chat["id"])
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
            # Real topic messages "reply" to the topic's creation service message.
            message["reply_to_message"] = self._topic_root(chat, user, thread_id)
        elif thread_id is not None:
            message["message_thread_id"] = thread_id
        if reply_to_bot:
            message["reply_to_message"] = self._latest_bot_message(chat, thread_id)

    def private_message(
        self,
        user_id: int,
        text: str,
        *,
        first_name: str = "Alice",
        username: str | None = None,
        reply_to_bot: bool = False,
        last_name: str | None = None,
    ) -> JSONDict:
        user = self._user(user_id, first_name, username, last_name)
        chat = self._chat(user_id, group=False, user=user)
        message = self._with_text(self._base_message(chat, user), text)
        self._placement(
            message, user, reply_to_bot=reply_to_bot, thread_id=None, topic_message=False
        )
        return self._wrap(message)

    def group_message(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        *,
        mention: bool = False,
        reply_to_bot: bool = False,
        thread_id: int | None = None,
        is_forum: bool = False,
        topic_message: bool = False,
        chat_type: str = "supergroup",
        first_name: str = "Alice",
        username: str | None = None,
        title: str = "Test Group",
    ) -> JSONDict:
        user = self._user(user_id, first_name, username)
        chat = self._chat(
            chat_id,
            group=True,
            user=user,
            chat_type=chat_type,
            is_forum=is_forum or topic_message,
            title=title,
        )
        if mention:
            text = f"@{self.bot_username} {text}"
        message = self._with_text(self._base_message(chat, user), text)
        self._placement(
            message,
            user,
            reply_to_bot=reply_to_bot,
            thread_id=thread_id,
            topic_message=topic_message,
        )
        return self._wrap(message)

    def command(
        self,
        chat_id: int,
        user_id: int,
        command: str,
        *,
        group: bool = False,
        with_bot_suffix: bool = False,
        thread_id: int | None = None,
        topic_message: bool = False,
        first_name: str = "Alice",
        username: str | None = None,
    ) -> JSONDict:
        """A command such as "/status" or "/ask some words" (args after the first space)."""
        word, sep, rest = command.partition(" ")
        if not word.startswith("/"):
            word = "/" + word
        if with_bot_suffix:
            word = f"{word}@{self.bot_username}"
        text = word + sep + rest
        user = self._user(user_id, first_name, username)
        chat = self._chat(chat_id, group=group, user=user, is_forum=topic_message)
        message = self._with_text(self._base_message(chat, user), text)
        self._placement(
            message, user, reply_to_bot=False, thread_id=thread_id, topic_message=topic_message
        )
        return self._wrap(message)

    def photo_message(
        self,
        chat_id: int,
        user_id: int,
        *,
        caption: str | None = None,
        group: bool = False,
        data: bytes = TINY_PNG,
        first_name: str = "Alice",
        username: str | None = None,
    ) -> JSONDict:
        """A photo (three PhotoSize entries, all downloadable via getFile) with optional caption."""
        user = self._user(user_id, first_name, username)
        chat = self._chat(chat_id, group=group, user=user)
        sizes = []
        for side in (90, 320, 800):
            meta = self.add_file(data, folder="photos", suffix=".jpg")
            sizes.append(
                {
                    "file_id": meta["file_id"],
                    "file_unique_id": meta["file_unique_id"],
                    "width": side,
                    "height": side,
                    "file_size": meta["file_size"],
                }
            )
        message = self._base_message(chat, user, photo=sizes)
        if caption is not None:
            self._with_text(message, caption, field="caption")
        return self._wrap(message)

    def album(
        self,
        chat_id: int,
        user_id: int,
        images: list[bytes],
        *,
        caption: str | None = None,
        group: bool = False,
    ) -> list[JSONDict]:
        """Photos sent as one album, as Telegram delivers them: one update per photo, all
        sharing a `media_group_id`, the caption on the first. Push each with push_update."""
        group_id = str(13_000_000_000_000_000 + self._next_update_id)
        updates = []
        for index, data in enumerate(images):
            update = self.photo_message(
                chat_id, user_id, caption=caption if index == 0 else None, group=group, data=data
            )
            update["message"]["media_group_id"] = group_id
            updates.append(update)
        return updates

    def document_message(
        self,
        chat_id: int,
        user_id: int,
        data: bytes,
        *,
        file_name: str,
        mime_type: str,
        caption: str | None = None,
        group: bool = False,
        first_name: str = "Alice",
        file_path: str | None = None,
    ) -> JSONDict:
        """A file sent as a document (downloadable via getFile up to the API's 20 MB)."""
        user = self._user(user_id, first_name, None)
        chat = self._chat(chat_id, group=group, user=user)
        meta = self.add_file(data, folder="documents", suffix="", file_path=file_path)
        document = {
            "file_id": meta["file_id"],
            "file_unique_id": meta["file_unique_id"],
            "file_name": file_name,
            "mime_type": mime_type,
            "file_size": meta["file_size"],
        }
        message = self._base_message(chat, user, document=document)
        if caption is not None:
            self._with_text(message, caption, field="caption")
        return self._wrap(message)

    def sticker_message(
        self,
        chat_id: int,
        user_id: int,
        *,
        emoji: str = "👍",
        group: bool = False,
        first_name: str = "Alice",
        username: str | None = None,
    ) -> JSONDict:
        user = self._user(user_id, first_name, username)
        chat = self._chat(chat_id, group=group, user=user)
        meta = self.add_file(TINY_PNG, folder="stickers", suffix=".webp")
        sticker = {
            "file_id": meta["file_id"],
            "file_unique_id": meta["file_unique_id"],
            "type": "regular",
            "width": 512,
            "height": 512,
            "is_animated": False,
            "is_video": False,
            "emoji": emoji,
            "set_name": "FakeStickers",
            "file_size": meta["file_size"],
        }
        return self._wrap(self._base_message(chat, user, sticker=sticker))

    def voice_message(
        self,
        chat_id: int,
        user_id: int,
        *,
        duration: int = 2,
        group: bool = False,
        data: bytes = FAKE_OGG,
        first_name: str = "Alice",
        username: str | None = None,
    ) -> JSONDict:
        user = self._user(user_id, first_name, username)
        chat = self._chat(chat_id, group=group, user=user)
        meta = self.add_file(data, folder="voice", suffix=".oga")
        voice = {
            "file_id": meta["file_id"],
            "file_unique_id": meta["file_unique_id"],
            "duration": duration,
            "mime_type": "audio/ogg",
            "file_size": meta["file_size"],
        }
        return self._wrap(self._base_message(chat, user, voice=voice))

    def edited_message(self, original: JSONDict, text: str) -> JSONDict:
        """An edited_message update for a message from a builder (Update or Message dict)."""
        kind = _message_kind(original)
        source = original[kind] if kind else original
        edited = {k: v for k, v in source.items() if k not in ("entities", "caption_entities")}
        edited["edit_date"] = int(time.time())
        self._with_text(edited, text, field="caption" if "caption" in source else "text")
        return self._wrap(edited, kind="edited_message")

    def callback_query(
        self,
        user_id: int,
        data: str,
        *,
        chat_id: int | None = None,
        message: JSONDict | None = None,
        first_name: str = "Alice",
        username: str | None = None,
    ) -> JSONDict:
        """A button press on `message` (default: the bot's latest message in `chat_id`)."""
        user = self._user(user_id, first_name, username)
        if message is None:
            chat = self.chats.get(chat_id if chat_id is not None else user_id) or self._chat(
                user_id, group=False, user=user
            )
            message = self._latest_bot_message(chat, None)
        query = {
            "id": f"{next(self._callback_seq)}{uuid.uuid4().int % 10**12}",
            "from": user,
            "chat_instance": str(message["chat"]["id"]),
            "message": message,
            "data": data,
        }
        self.callback_queries[query["id"]] = time.monotonic()
        return {"update_id": self._take_update_id(), "callback_query": query}

    def buttons(self, chat_id: int, message_id: int | None = None) -> list[str]:
        """The labels of the inline buttons under the bot's message `message_id` (default:
        its latest message in `chat_id` that has buttons), as the chat shows them now."""
        message = self._button_message(chat_id, message_id)
        rows = (message or {}).get("reply_markup", {}).get("inline_keyboard", [])
        return [button["text"] for row in rows for button in row]

    def _button_message(self, chat_id: int, message_id: int | None) -> JSONDict | None:
        if message_id is not None:
            return self.messages.get((chat_id, message_id))
        for message in reversed(self.bot_messages(chat_id)):
            if message.get("reply_markup", {}).get("inline_keyboard"):
                return message
        return None

    def press(
        self,
        chat_id: int,
        user_id: int,
        label: str,
        *,
        message_id: int | None = None,
        first_name: str = "Alice",
        username: str | None = None,
    ) -> JSONDict:
        """The `callback_query` update of `user_id` pressing the button labelled `label`
        under a bot message (default: its latest one with buttons in `chat_id`)."""
        message = self._button_message(chat_id, message_id)
        if message is None:
            raise AssertionError(f"no bot message with buttons in chat {chat_id}")
        for row in message["reply_markup"]["inline_keyboard"]:
            for button in row:
                if button["text"] == label:
                    return self.callback_query(
                        user_id,
                        button["callback_data"],
                        message=message,
                        first_name=first_name,
                        username=username,
                    )
        raise AssertionError(f"no button {label!r} under message {message['message_id']}")


@pytest_asyncio.fixture
async def fake_telegram() -> AsyncIterator[FakeTelegram]:
    """A started FakeTelegram; build the app with ``fake_telegram.app_builder().build()``."""
    async with FakeTelegram() as fake:
        yield fake
