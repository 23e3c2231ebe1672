"""The single tool-result cap: one result may fill at most a share of the context window.

Applied in memory to every request (the transcript keeps the original), and deterministic,
so a capped result renders byte-identically on every turn and the prompt cache holds.
"""

from __future__ import annotations

from typing import Any

from bot.config import ContextConfig
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


def _text_blocks(content: Any) -> list[dict[str, Any]] | None:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return content
    return None


def cap_result_content(content: Any, limit: int) -> Any:
    """Cap a tool_result's content to `limit` characters of text; images are kept as they are.

    Several text blocks share the budget in proportion to their size. Returns `content`
    itself when nothing needs cutting.
    """
    blocks = _text_blocks(content)
    if blocks is None:
        return content
    sizes = [len(b.get("text", "")) if b.get("type") == "text" else 0 for b in blocks]
    total = sum(sizes)
    if total <= limit:
        return content
    capped: list[dict[str, Any]] = []
    kept_total = 0
    for block, size in zip(blocks, sizes, strict=True):
        if not size:
            capped.append(block)
            continue
        share = max(1, limit * size // total)  # an empty text block is a 400 error
        text = cut_head(block["text"], share)
        kept_total += len(text)
        capped.append({**block, "text": text})
    notice = TRUNCATION_NOTICE.format(kept=kept_total, total=total)
    last_text = max(i for i, size in enumerate(sizes) if size)
    capped[last_text] = {**capped[last_text], "text": capped[last_text]["text"] + notice}
    if isinstance(content, str):
        return capped[0]["text"]
    return capped


def cap_tool_results(messages: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """`messages` with every tool_result over `limit` characters capped (new objects only
    where something changed)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            out.append(message)
            continue
        changed = False
        blocks: list[dict[str, Any]] = []
        for block in content:
            if block.get("type") == "tool_result":
                capped = cap_result_content(block.get("content"), limit)
                if capped is not block.get("content"):
                    block = {**block, "content": capped}
                    changed = True
            blocks.append(block)
        out.append({**message, "content": blocks} if changed else message)
    return out
