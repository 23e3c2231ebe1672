"""Reading the SDK's message params: content blocks, tool-result text, messages by role."""

from __future__ import annotations

from anthropic.types import Base64ImageSourceParam, MessageParam, ToolResultBlockParam

from bot.context.blocks import content_blocks, make_message, result_blocks, result_text


def test_string_content_reads_as_one_text_block_and_empty_as_none() -> None:
    assert content_blocks({"role": "user", "content": "hi"}) == [{"type": "text", "text": "hi"}]
    assert content_blocks({"role": "user", "content": ""}) == []
    blocks: MessageParam = {"role": "assistant", "content": [{"type": "text", "text": "a"}]}
    assert content_blocks(blocks) == [{"type": "text", "text": "a"}]


def test_result_text_joins_text_blocks_and_skips_images() -> None:
    image: Base64ImageSourceParam = {"type": "base64", "media_type": "image/png", "data": "AA=="}
    block: ToolResultBlockParam = {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": [
            {"type": "text", "text": "one"},
            {"type": "image", "source": image},
            {"type": "text", "text": "two"},
        ],
    }
    assert result_text(block) == "one\ntwo"
    assert len(result_blocks(block)) == 3
    bare: ToolResultBlockParam = {"type": "tool_result", "tool_use_id": "c2", "content": "x"}
    assert result_text(bare) == "x" and result_blocks(bare) == [{"type": "text", "text": "x"}]


def test_messages_are_built_for_either_role() -> None:
    assert make_message("assistant", [])["role"] == "assistant"
    assert make_message("user", [])["role"] == "user"
