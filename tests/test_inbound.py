"""Inbound messages made safe to record: lone surrogates replaced, huge texts cut."""

from __future__ import annotations

import dataclasses

from bot.inbound import MAX_MESSAGE_CHARS, sanitize_inbound
from bot.types import ChatType
from tests.app_harness import message


def test_lone_surrogates_become_replacement_characters_everywhere() -> None:
    raw = message("half \ud83d a pair", user_name="Ann \udc00")
    raw = dataclasses.replace(raw, context_lines=["Bob: \ud800 hi"], meta={"team": "T\udfff"})
    msg = sanitize_inbound(raw)
    assert msg.text == "half \ufffd a pair"
    assert msg.user_name == "Ann \ufffd"
    assert msg.context_lines == ["Bob: \ufffd hi"]
    assert msg.meta == {"team": "T\ufffd"}
    assert msg.chat_type is ChatType.DIRECT
    msg.to_json().encode("utf-8")  # storable now


def test_ordinary_text_is_left_exactly_as_written() -> None:
    text = "مرحبا 👩\u200d👩\u200d👧 cafe\u0301 \u202etxet\u202c"
    assert sanitize_inbound(message(text)).text == text


def test_a_huge_message_is_cut_with_a_note_saying_how_long_it_was() -> None:
    text = "x" * (MAX_MESSAGE_CHARS + 5)
    cut = sanitize_inbound(message(text)).text
    assert cut.startswith("x" * MAX_MESSAGE_CHARS)
    assert cut.endswith(f"it had {len(text):,} characters; only the first 200,000 are kept]")
    assert sanitize_inbound(message("x" * MAX_MESSAGE_CHARS)).text == "x" * MAX_MESSAGE_CHARS
