"""The single tool-result cap."""

from __future__ import annotations

from bot.config import ContextConfig
from bot.context.truncation import (
    cap_result_content,
    cap_tool_results,
    cut_head,
    result_char_limit,
)


def result(content, call_id: str = "t1") -> dict:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content}


def test_limit_is_a_share_of_the_window_with_a_hard_max() -> None:
    cfg = ContextConfig()
    assert result_char_limit(10_000, cfg) == 12_000  # 30% of 10k tokens, 4 chars each
    assert result_char_limit(1_000_000, cfg) == 400_000
    assert result_char_limit(10_000, ContextConfig(tool_result_max_share=0.5)) == 20_000


def test_cut_prefers_a_newline_in_the_last_fifth() -> None:
    text = "a" * 85 + "\n" + "b" * 100
    assert cut_head(text, 100) == "a" * 85
    # A newline before the last 20% is too early to use: cut hard instead.
    early = "a" * 50 + "\n" + "b" * 100
    assert cut_head(early, 100) == early[:100]
    assert cut_head("short", 100) == "short"


def test_small_results_are_left_alone() -> None:
    messages = [{"role": "user", "content": [result("x" * 100)]}]
    assert cap_tool_results(messages, 100)[0] is messages[0]


def test_oversized_result_keeps_its_head_and_a_notice() -> None:
    text = "\n".join(f"line {i:04d}" for i in range(2000))
    capped = cap_result_content(text, 1000)
    head, _, notice = capped.partition("\n\n[Tool result truncated")
    assert text.startswith(head) and len(head) <= 1000 and head.endswith(("9", "8", "7"))
    assert "smaller piece" in notice and f"of {len(text):,}" in notice


def test_text_blocks_share_the_budget_in_proportion_and_images_stay() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}}
    content = [
        {"type": "text", "text": "a" * 3000},
        image,
        {"type": "text", "text": "b" * 1000},
    ]
    capped = cap_result_content(content, 2000)
    assert capped[1] == image
    assert capped[0]["text"] == "a" * 1500
    assert capped[2]["text"].startswith("b" * 500 + "\n\n[Tool result truncated")
    assert content[0]["text"] == "a" * 3000  # the input is not modified


def test_only_tool_results_are_capped() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "q" * 5000}]},
        {"role": "assistant", "content": [{"type": "text", "text": "r" * 5000}]},
        {"role": "user", "content": [result("z" * 5000)]},
    ]
    capped = cap_tool_results(messages, 1000)
    assert capped[0] is messages[0] and capped[1] is messages[1]
    assert len(capped[2]["content"][0]["content"]) < 1200
    assert messages[2]["content"][0]["content"] == "z" * 5000
