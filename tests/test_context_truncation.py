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


def test_oversized_result_keeps_head_and_tail_with_the_notice_inside_the_cap() -> None:
    text = "\n".join(f"line {i:04d}" for i in range(2000)) + "\nError: disk full at /var/x"
    capped = cap_result_content(text, 1000)
    assert len(capped) <= 1000
    head, _, rest = capped.partition("\n\n[Tool result truncated")
    notice, _, tail = rest.partition("]\n\n")
    assert text.startswith(head) and head.rsplit("\n", 1)[-1].startswith("line ")
    assert len(head.rsplit("\n", 1)[-1]) == len("line 0000")  # cut on a line boundary
    assert text.endswith(tail) and tail.endswith("Error: disk full at /var/x")
    assert tail.startswith("line ")  # cut on a line boundary
    assert "smaller piece" in notice and f"of {len(text):,}" in notice


def test_a_tiny_cap_keeps_only_the_head() -> None:
    assert cap_result_content("x" * 1000, 100) == "x" * 100


def test_cjk_results_are_capped_by_their_token_size() -> None:
    text = "部署失败" * 5000  # 20,000 characters, about as many tokens
    capped = cap_result_content(text, 8000)
    assert 1500 <= len(capped) <= 2000  # 8,000 Latin-equivalent characters = ~2,000 tokens


def test_text_blocks_share_the_budget_in_proportion_and_images_stay() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}}
    content = [
        {"type": "text", "text": "a" * 3000},
        image,
        {"type": "text", "text": "b" * 1000},
    ]
    capped = cap_result_content(content, 2000)
    assert capped[1] == image
    assert len(capped[0]["text"]) <= 1500 and len(capped[2]["text"]) <= 500
    assert capped[0]["text"].startswith("a" * 500) and capped[0]["text"].endswith("a" * 300)
    assert "[Tool result truncated" in capped[0]["text"]
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
