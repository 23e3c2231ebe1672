"""The single tool-result cap: one result may fill at most a share of the context window.

Applied in memory to every request (the transcript keeps the original), and deterministic,
so a capped result renders byte-identically on every turn and the prompt cache holds.
"""

from __future__ import annotations

from collections.abc import Iterable

from anthropic.types import ContentBlockParam, MessageParam

from bot.config import ContextConfig
from bot.context.blocks import ResultContent, content_blocks, make_message, text_block
from bot.context.tokens import CHARS_PER_TOKEN

# A cut lands on a newline when one lies in this last share of the budget, so the model
# does not see half a line.
NEWLINE_SEARCH_SHARE = 0.2
TRUNCATION_NOTICE = (
    "\n\n[Tool result truncated: showing the first {kept:,} of {total:,} characters. "
    "If you need more, ask the tool for a smaller piece (a range, a page or a filter).]"
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


def cap_result_content(
    content: str | Iterable[ResultContent], limit: int
) -> str | Iterable[ResultContent]:
    """Cap a tool_result's content to `limit` characters of text; images are kept as they are.

    Several text blocks share the budget in proportion to their size. Returns `content`
    itself when nothing needs cutting.
    """
    capped: list[ResultContent] = (
        [text_block(content)] if isinstance(content, str) else list(content)
    )
    texts = [(i, b) for i, b in enumerate(capped) if b["type"] == "text" and b["text"]]
    total = sum(len(block["text"]) for _, block in texts)
    if total <= limit:
        return content
    kept_total = 0
    for n, (index, block) in enumerate(texts, 1):
        share = max(1, limit * len(block["text"]) // total)  # an empty text block is a 400 error
        cut = block.copy()
        cut["text"] = cut_head(block["text"], share)
        kept_total += len(cut["text"])
        if n == len(texts):
            cut["text"] += TRUNCATION_NOTICE.format(kept=kept_total, total=total)
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
