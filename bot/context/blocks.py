"""Reading and building the SDK's message params: a message's content blocks, a tool
result's blocks and text, and a message of a given role.

The SDK types `content` as a string or any iterable (it also admits response objects);
requests Krill builds hold plain lists of block dicts, so these helpers are the one place
that narrows the SDK's wider types.
"""

from __future__ import annotations

from anthropic.types import ContentBlockParam, MessageParam, TextBlockParam, ToolResultBlockParam
from anthropic.types.tool_result_block_param import Content as ResultContent

__all__ = [
    "ResultContent",
    "content_blocks",
    "make_message",
    "result_blocks",
    "result_text",
    "text_block",
]


def text_block(text: str) -> TextBlockParam:
    return {"type": "text", "text": text}


def content_blocks(message: MessageParam) -> list[ContentBlockParam]:
    """The blocks of a message; string content reads as one text block."""
    content = message["content"]
    if isinstance(content, str):
        return [text_block(content)] if content else []
    return [block for block in content if isinstance(block, dict)]


def make_message(role: str, content: list[ContentBlockParam]) -> MessageParam:
    """A user or assistant message (tool results travel in user messages)."""
    if role == "assistant":
        return {"role": "assistant", "content": content}
    return {"role": "user", "content": content}


def result_blocks(block: ToolResultBlockParam) -> list[ResultContent]:
    """The blocks of a tool result; string content reads as one text block."""
    content = block.get("content", "")
    if isinstance(content, str):
        return [text_block(content)] if content else []
    return list(content)


def result_text(block: ToolResultBlockParam) -> str:
    """A tool result's text (its text blocks joined by newlines)."""
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] for b in content if b["type"] == "text")
