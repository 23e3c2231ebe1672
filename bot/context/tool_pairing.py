"""Repair tool_use/tool_result pairing before any request.

The API rejects a request unless every tool_use is answered by a tool_result in the very
next message and every tool_result answers a tool_use in the message before it. Crashes,
stops and history cuts can break that, so the request is repaired deterministically:
results are moved next to their call, orphan and duplicate results dropped, duplicate calls
dropped, and a synthetic error result stands in for any result that is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from anthropic.types import ContentBlockParam, MessageParam, ToolResultBlockParam, ToolUseBlockParam

from bot.context.blocks import content_blocks, make_message

MISSING_RESULT = "Error: this tool call did not finish (interrupted); no result is available."


@dataclass(slots=True)
class PairingReport:
    moved: int = 0
    orphans_dropped: int = 0
    duplicates_dropped: int = 0
    synthesized: int = 0

    @property
    def changed(self) -> bool:
        return any((self.moved, self.orphans_dropped, self.duplicates_dropped, self.synthesized))


@dataclass(slots=True)
class PairingScan:
    """Reads messages in order and says whether they are already well formed, so that
    `repair_pairing` would give back messages equal to them: list content of blocks, roles
    alternating from a user message on, every tool_use id new, each assistant message's
    calls answered first thing in the next message, in order, and no other result anywhere.
    It can be fed more messages later, which lets a kept history be checked only where it
    grew."""

    last_role: str | None = None
    pending: list[str] = field(default_factory=list)
    calls: set[str] = field(default_factory=set)

    def feed(self, messages: list[MessageParam]) -> bool:
        """False as soon as a message would need repair (the scan is then spent)."""
        for message in messages:
            role, content = message["role"], message["content"]
            if role == self.last_role or (self.last_role is None and role != "user"):
                return False
            if isinstance(content, str) or not content:
                return False
            answered = 0
            blocks: list[Any] = list(content)  # read as plain JSON, not as the typed params
            for block in blocks:
                if not isinstance(block, dict):
                    return False
                kind = block["type"]
                if kind == "tool_use" and role == "assistant":
                    if block["id"] in self.calls:
                        return False
                    self.calls.add(block["id"])
                elif kind == "tool_result":
                    pending = self.pending
                    if role != "user" or answered >= len(pending):
                        return False
                    if block["tool_use_id"] != pending[answered]:
                        return False
                    answered += 1
                elif answered < len(self.pending):
                    return False  # a call left unanswered, or answered after other content
            if answered < len(self.pending):
                return False
            self.pending = (
                [b["id"] for b in blocks if b["type"] == "tool_use"] if role == "assistant" else []
            )
            self.last_role = role
        return True

    @property
    def complete(self) -> bool:
        """Whether the messages so far end well formed (no call waits for its result)."""
        return self.last_role is not None and not self.pending


def merge_same_role(messages: list[MessageParam]) -> list[MessageParam]:
    """Join consecutive messages of one role (the API wants roles to alternate)."""
    merged: list[MessageParam] = []
    for message in messages:
        if merged and merged[-1]["role"] == message["role"]:
            joined = [*content_blocks(merged[-1]), *content_blocks(message)]
            merged[-1] = make_message(message["role"], joined)
        else:
            merged.append(message)
    return merged


def _results_first(message: MessageParam) -> MessageParam:
    # The API wants tool_result blocks before any other content in a user message.
    if message["role"] != "user":
        return message
    blocks = content_blocks(message)
    results: list[ContentBlockParam] = [b for b in blocks if b["type"] == "tool_result"]
    if not results or blocks[: len(results)] == results:
        return message
    others: list[ContentBlockParam] = [b for b in blocks if b["type"] != "tool_result"]
    return make_message("user", results + others)


def repair_pairing(messages: list[MessageParam]) -> tuple[list[MessageParam], PairingReport]:
    """Return repaired messages (alternating roles, results first) and what was fixed.

    Messages that need no repair come back equal to the input (list content assumed).
    """
    report = PairingReport()
    # Where each call lives, and the first result seen for each id (with its position).
    call_at: dict[str, int] = {}
    calls: list[list[ContentBlockParam]] = []
    for index, message in enumerate(messages):
        kept: list[ContentBlockParam] = []
        if message["role"] == "assistant":
            for block in content_blocks(message):
                if block["type"] == "tool_use":
                    if block["id"] in call_at:
                        report.duplicates_dropped += 1
                        continue
                    call_at[block["id"]] = index
                kept.append(block)
        calls.append(kept)
    results: dict[str, tuple[int, ToolResultBlockParam]] = {}
    for index, message in enumerate(messages):
        if message["role"] != "user":
            continue
        for block in content_blocks(message):
            if block["type"] != "tool_result":
                continue
            call_id = block["tool_use_id"]
            if call_id not in call_at:
                report.orphans_dropped += 1
            elif call_id in results:
                report.duplicates_dropped += 1
            else:
                results[call_id] = (index, block)

    out: list[MessageParam] = []
    for index, message in enumerate(messages):
        if message["role"] == "assistant":
            content = calls[index]
            if not content:
                continue
            out.append(make_message("assistant", content))
            answers = [
                _answer(block, results, index, report)
                for block in content
                if block["type"] == "tool_use"
            ]
            if answers:
                out.append(make_message("user", answers))
        else:
            others: list[ContentBlockParam] = [
                b for b in content_blocks(message) if b["type"] != "tool_result"
            ]
            if others:
                out.append(make_message(message["role"], others))
    repaired = [_results_first(m) for m in merge_same_role(out)]
    return repaired, report


def _answer(
    call: ToolUseBlockParam,
    results: dict[str, tuple[int, ToolResultBlockParam]],
    index: int,
    report: PairingReport,
) -> ContentBlockParam:
    """The result for the call in message `index`: the one found, or a synthetic error."""
    found = results.get(call["id"])
    if found is None:
        report.synthesized += 1
        return {
            "type": "tool_result",
            "tool_use_id": call["id"],
            "content": MISSING_RESULT,
            "is_error": True,
        }
    if found[0] != index + 1:
        report.moved += 1
    return found[1]
