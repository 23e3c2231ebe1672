"""Token accounting: chars/4 x 1.2, anchored on the last real usage."""

from __future__ import annotations

from bot.context.messages import build_messages
from bot.context.size import context_tokens
from bot.context.tokens import (
    IMAGE_TOKENS,
    find_anchor,
    messages_tokens,
    tokens_for_chars,
)
from bot.transcript import Entry
from bot.types import Usage
from tests import entries


def user(text: str, seq: int) -> Entry:
    return entries.person(text, seq=seq)


def reply(text: str, seq: int, usage: Usage | None = None) -> Entry:
    return entries.reply(entries.text(text), seq=seq, usage=usage)


USAGE = Usage(input_tokens=10, cache_read_tokens=900, cache_write_tokens=80, output_tokens=10)


def test_chars_over_four_with_margin() -> None:
    assert tokens_for_chars(4000) == 1200
    assert tokens_for_chars(1) == 1
    assert tokens_for_chars(0) == 0


def test_message_estimate_counts_text_tools_and_images() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "x" * 400}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "look", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t",
                    "content": [{"type": "image", "source": {}}, {"type": "text", "text": "y"}],
                }
            ],
        },
    ]
    # 400 + len("look") + len("{}") + 1 characters, plus one image.
    assert messages_tokens(messages) == tokens_for_chars(407) + IMAGE_TOKENS
    assert messages_tokens([], overhead_chars=40) == tokens_for_chars(40)


def test_anchor_is_the_newest_usage_after_the_latest_compaction() -> None:
    history = [user("a", 1), reply("b", 2, USAGE), user("c", 3)]
    anchor = find_anchor(history)
    assert anchor is not None and anchor.entry_id == history[1].id and anchor.tokens == 1000
    compaction = entries.summary("x", seq=4)
    # After compaction the kept entries' usage describes a context that no longer exists.
    assert find_anchor([compaction, *history]) is None
    assert find_anchor([user("a", 1)]) is None


def test_anchored_estimate_adds_only_what_came_after() -> None:
    history = [user("hello " * 100, 1), reply("hi", 2, USAGE), user("z" * 4000, 3)]
    messages = build_messages(history, "UTC")
    anchored = context_tokens(history, messages, tz="UTC", overhead_chars=10**6, result_limit=10**6)
    tail = messages_tokens(build_messages(history[2:], "UTC"))
    # The real 1,000 tokens stand for everything up to the reply; the overhead is inside it.
    assert anchored == 1000 + tail
    unanchored = context_tokens(
        history[:1], messages[:1], tz="UTC", overhead_chars=4000, result_limit=10**6
    )
    assert unanchored == messages_tokens(messages[:1], 4000)


def test_cjk_and_other_non_latin_scripts_count_about_a_token_per_character() -> None:
    chinese = "我们明天在上海开会讨论新的部署计划" * 100  # 1,700 characters
    estimate = messages_tokens([{"role": "user", "content": chinese}])
    assert len(chinese) <= estimate <= len(chinese) * 1.3
    russian = "Развёртывание завтра" * 50
    assert messages_tokens([{"role": "user", "content": russian}]) >= len(russian) * 0.8
    # Latin text, accents included, stays at about four characters a token.
    french = "Déployer le café à l'hôtel " * 100
    assert messages_tokens([{"role": "user", "content": french}]) == tokens_for_chars(len(french))
