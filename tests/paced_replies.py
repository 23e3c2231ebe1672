"""Long numbered replies for the pacing tests: the fake model answers each turn in several
chunks naming the messages it answers, so a test can check every message got its whole
reply, each part once and in order, however turns were merged."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.fakes.anthropic import Reply, ReplyLike

TAG = re.compile(r"msg-\d+")
FILLER = "lorem ipsum"


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return " ".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def long_replies(parts: int, part_chars: int) -> Callable[[dict[str, Any]], ReplyLike]:
    """A model handler answering in `parts` paragraphs of about `part_chars` characters
    (pick it so that each paragraph is one platform message)."""

    def reply(body: dict[str, Any]) -> ReplyLike:
        tags = " ".join(TAG.findall(_last_user_text(body)))
        filler = " ".join([FILLER] * (part_chars // (len(FILLER) + 1)))
        return Reply.text(
            "\n\n".join(f"[{tags} part {n}/{parts}] {filler}" for n in range(1, parts + 1))
        )

    return reply


def is_last_part(text: str, tag: str, parts: int) -> bool:
    header = text.split("]")[0]
    return tag in TAG.findall(header) and header.endswith(f"part {parts}/{parts}")


def assert_complete_and_in_order(texts: list[str], tags: list[str], parts: int) -> None:
    """Every reply's parts arrived one after another, 1..parts, whole, and every message was
    answered exactly once."""
    headers = [t.split("]")[0].lstrip("[") for t in texts]
    answered: list[str] = []
    for start in range(0, len(headers), parts):
        turn = headers[start : start + parts]
        turn_tags = turn[0].rsplit(" part ", 1)[0]
        assert turn == [f"{turn_tags} part {n}/{parts}" for n in range(1, parts + 1)], headers
        answered += TAG.findall(turn_tags)
    assert sorted(answered) == sorted(tags)
    assert all(t.rstrip().endswith(FILLER) for t in texts)  # no part cut short
