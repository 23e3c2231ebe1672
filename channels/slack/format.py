"""Markdown for Slack: splitting a reply into message-sized chunks, and the mrkdwn fallback.

Slack renders standard Markdown itself when it arrives in `markdown_text`, so chunks stay
Markdown; `to_mrkdwn` is only for the places (and workspaces) where `markdown_text` is not
accepted. Everything here is pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from markdown_to_mrkdwn import SlackMarkdownConverter

from bot.types import Source
from channels.chunking import Fits, attach_lone_markers, hard_split, pack, split_paragraph
from channels.sources import LABEL

# `markdown_text` takes at most 12,000 characters; Slack advises messages of about 4,000.
# 8,000 keeps a long answer to a few messages while leaving room below the hard cap.
MARKDOWN_TEXT_MAX = 12_000
CHUNK_CHARS = 8_000

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_LANG_TAG = re.compile(r"^(\s*```)[^\s`]+[ \t]*$", re.MULTILINE)
_LEADING_QUOTE = re.compile(r"^(\s*>+)(.*)$")
# Slack's own syntax a reply may carry on purpose: <@U…> and <#C…|name> mentions, <!here>
# and other special mentions, and <url|text> links. These pass through unescaped.
_SLACK_TOKEN = re.compile(
    r"<(?:[@#!][^<>\s|]+(?:\|[^<>]*)?|(?:https?|mailto):[^<>\s|]+(?:\|[^<>]*)?)>"
)
_converter = SlackMarkdownConverter()


@dataclass(frozen=True, slots=True)
class _Block:
    """A paragraph, or a fenced code block."""

    text: str
    fence: str = ""  # the opening fence line ("```python") for code blocks, else ""

    @property
    def is_code(self) -> bool:
        return bool(self.fence)


def _closes(match: re.Match[str], opener: str) -> bool:
    """Whether a fence line ends the code block `opener` began (same character, as long)."""
    fence, rest = match.group(1), match.group(2)
    return fence[0] == opener[0] and len(fence) >= len(opener) and not rest.strip()


def _blocks(markdown: str) -> list[_Block]:
    """Split Markdown into paragraphs and fenced code blocks (fences kept with their code)."""
    blocks: list[_Block] = []
    paragraph: list[str] = []
    code: list[str] = []
    opener = ""  # the fence characters that opened the current code block

    def flush_paragraph() -> None:
        if paragraph:
            blocks.append(_Block("\n".join(paragraph)))
            paragraph.clear()

    for line in markdown.split("\n"):
        match = _FENCE.match(line)
        if opener:
            code.append(line)
            if match and _closes(match, opener):
                blocks.append(_Block("\n".join(code), fence=code[0].strip()))
                code, opener = [], ""
        elif match:
            flush_paragraph()
            opener = match.group(1)
            code = [line]
        elif line.strip():
            paragraph.append(line)
        else:
            flush_paragraph()
    flush_paragraph()
    if code:  # an unterminated fence: close it so the rest of the reply renders as code
        closing_fence = opener[0] * len(opener)
        blocks.append(_Block("\n".join([*code, closing_fence]), fence=code[0].strip()))
    return blocks


def _within(limit: int) -> Fits:
    return lambda text: len(text) <= limit


def _split_lines(text: str, limit: int) -> list[str]:
    """Pack whole lines into pieces of at most `limit` characters."""
    fits = _within(limit)
    parts = (part for line in text.split("\n") for part in hard_split(line, fits))
    return pack(parts, "\n", fits)


def _split_code(block: _Block, limit: int) -> list[str]:
    """Split a code block that is too long on its own into several complete code blocks."""
    lines = block.text.split("\n")
    closing = _FENCE.match(lines[-1])
    close = closing.group(1) if closing else "```"
    body = "\n".join(lines[1:-1])
    room = max(limit - len(block.fence) - len(close) - 2, 1)
    return [f"{block.fence}\n{piece}\n{close}" for piece in _split_lines(body, room)]


def split_markdown(markdown: str, limit: int = CHUNK_CHARS) -> list[str]:
    """Chunks of at most `limit` characters, cut between paragraphs, then between lines.

    A code block is never cut in the middle unless it alone exceeds `limit`; then each
    piece is closed and reopened with the same fence, so every chunk renders on its own. A
    paragraph is cut by `split_paragraph`: not inside a short aside, and a style cut in two
    is closed and reopened (the markers count towards `limit`).
    """
    if limit < 20:
        raise ValueError(f"chunk limit too small: {limit}")

    def pieces(block: _Block) -> list[str]:
        if block.is_code:
            return [block.text] if len(block.text) <= limit else _split_code(block, limit)
        return split_paragraph(attach_lone_markers(block.text), _within(limit))

    return pack(
        (piece for block in _blocks(markdown.strip()) for piece in pieces(block)),
        "\n\n",
        _within(limit),
    )


def _escape_line(line: str) -> str:
    # Slack reads "<...>" as links and mentions and "&" as an entity; a leading ">" is
    # Markdown's quote marker, which the mrkdwn converter keeps, so it stays as is.
    quote = _LEADING_QUOTE.match(line)
    head, rest = (quote.group(1), quote.group(2)) if quote else ("", line)
    out: list[str] = []
    last = 0
    for token in _SLACK_TOKEN.finditer(rest):
        out.append(_escape(rest[last : token.start()]))
        out.append(token.group())
        last = token.end()
    out.append(_escape(rest[last:]))
    return head + "".join(out)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_mrkdwn(markdown: str) -> str:
    """Slack mrkdwn for `markdown`: control characters escaped (except in Slack's own
    mentions and links), code-fence languages dropped.

    Slack would print a fence's language tag ("```python") as the code's first line.
    """
    escaped = "\n".join(_escape_line(line) for line in markdown.split("\n"))
    return _LANG_TAG.sub(r"\1", _converter.convert(escaped))


def _mrkdwn_link(source: Source) -> str:
    # "|" and ">" would end the link early; a title cannot open a mention or another link.
    url = source.url.replace("|", "%7C").replace(">", "%3E").replace("<", "%3C")
    title = _escape(" ".join(source.title.split())).replace("|", "¦")
    return f"<{url}|{title}>"


def sources_block(sources: Sequence[Source]) -> dict[str, Any]:
    """A context block (small grey text under the reply) linking to each source."""
    elements = [{"type": "mrkdwn", "text": f"*{LABEL}*"}]
    elements += [{"type": "mrkdwn", "text": _mrkdwn_link(s)} for s in sources]
    return {"type": "context", "elements": elements}


def sources_mrkdwn(sources: Sequence[Source]) -> str:
    """The same links as one mrkdwn line, for where blocks are not taken."""
    return f"*{LABEL}* " + " · ".join(_mrkdwn_link(s) for s in sources)
