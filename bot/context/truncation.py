"""The single tool-result cap: one result may fill at most a share of the context window.

Applied in memory to every request (the transcript keeps the original), and deterministic,
so a capped result renders byte-identically on every turn and the prompt cache holds.
"""

from __future__ import annotations

from collections.abc import Iterable

from anthropic.types import ContentBlockParam, MessageParam

from bot.config import ContextConfig
from bot.context.blocks import ResultContent, content_blocks, make_message, text_block
from bot.context.tokens import CHARS_PER_TOKEN, text_units

# A cut lands on a newline when one lies in this last share of the budget, so the model
# does not see half a line.
NEWLINE_SEARCH_SHARE = 0.2
# A cut result keeps this share of its room from the head, the rest from the tail, where
# errors and totals usually are.
HEAD_SHARE = 2 / 3
# Below this much room besides the notice only the head is kept.
MIN_TAIL_ROOM = 200
TRUNCATION_NOTICE = (
    "\n\n[Tool result truncated: {omitted:,} of {total:,} characters left out here; the "
    "start and the end are shown. If you need more, ask the tool for a smaller piece (a "
    "range, a page or a filter).]\n\n"
)


def result_char_limit(window: int, config: ContextConfig) -> int:
    """Characters one tool result may keep: a share of the window, never above the hard max."""
    share_chars = int(window * config.tool_result_max_share * CHARS_PER_TOKEN)
    return min(share_chars, config.tool_result_max_chars)


def cut_head(text: str, budget: int) -> str:
    """The first `budget` characters of `text`, ending at a newline if one lies in the last
    `NEWLINE_SEARCH_SHARE` of the budget."""
    if len(text) <= budget:
        return text
    head = text[:budget]
    newline = head.rfind("\n", int(budget * (1 - NEWLINE_SEARCH_SHARE)))
    return head[:newline] if newline > 0 else head


def cut_tail(text: str, budget: int) -> str:
    """The last `budget` characters of `text`, starting after a newline if one lies in the
    first `NEWLINE_SEARCH_SHARE` of them."""
    if len(text) <= budget:
        return text
    tail = text[len(text) - budget :]
    newline = tail.find("\n", 0, int(budget * NEWLINE_SEARCH_SHARE))
    return tail[newline + 1 :] if newline >= 0 else tail


def cut_middle(text: str, budget: int) -> str:
    """`text` in at most `budget` characters: its head and tail around a notice saying how
    much was left out (the notice counts towards the budget)."""
    if len(text) <= budget:
        return text
    notice_room = len(TRUNCATION_NOTICE.format(omitted=len(text), total=len(text)))
    room = budget - notice_room
    if room < MIN_TAIL_ROOM:
        return cut_head(text, budget)
    head = cut_head(text, int(room * HEAD_SHARE))
    tail = cut_tail(text, room - len(head))
    omitted = len(text) - len(head) - len(tail)
    return head + TRUNCATION_NOTICE.format(omitted=omitted, total=len(text)) + tail


def cap_result_content(
    content: str | Iterable[ResultContent], limit: int
) -> str | Iterable[ResultContent]:
    """Cap a tool_result's content to `limit` characters of text (counted as `text_units`,
    so a CJK result gets its fair share of tokens); images are kept as they are.

    Several text blocks share the budget in proportion to their size. Returns `content`
    itself when nothing needs cutting.
    """
    capped: list[ResultContent] = (
        [text_block(content)] if isinstance(content, str) else list(content)
    )
    texts = [(i, b, text_units(b["text"])) for i, b in enumerate(capped) if b["type"] == "text"]
    total = sum(units for _, _, units in texts)
    if total <= limit:
        return content
    for index, block, units in texts:
        if not units:
            continue
        share = max(1, limit * units // total)  # an empty text block is a 400 error
        cut = block.copy()
        cut["text"] = cut_middle(block["text"], max(1, share * len(block["text"]) // units))
        capped[index] = cut
    if isinstance(content, str):
        return "".join(block["text"] for block in capped if block["type"] == "text")
    return capped


def cap_tool_results(messages: list[MessageParam], limit: int) -> list[MessageParam]:
    """`messages` with every tool_result over `limit` characters capped (new objects only
    where something changed)."""
    out: list[MessageParam] = []
    for message in messages:
        if message["role"] != "user" or isinstance(message["content"], str):
            out.append(message)
            continue
        changed = False
        blocks: list[ContentBlockParam] = []
        for block in content_blocks(message):
            if block["type"] == "tool_result" and "content" in block:
                capped = cap_result_content(block["content"], limit)
                if capped is not block["content"]:
                    block = block.copy()
                    block["content"] = capped
                    changed = True
            blocks.append(block)
        out.append(make_message("user", blocks) if changed else message)
    return out
