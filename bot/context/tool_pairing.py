"""Repair tool_use/tool_result pairing before any request.

The API rejects a request unless every tool_use is answered by a tool_result in the very
next message and every tool_result answers a tool_use in the message before it. Crashes,
stops and history cuts can break that, so the request is repaired deterministically:
results are moved next to their call, orphan and duplicate results dropped, duplicate calls
dropped, and a synthetic error result stands in for any result that is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content or [])


def merge_same_role(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join consecutive messages of one role (the API wants roles to alternate)."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1] = {
                "role": message["role"],
                "content": [*merged[-1]["content"], *message["content"]],
            }
        else:
            merged.append(message)
    return merged


def _results_first(message: dict[str, Any]) -> dict[str, Any]:
    # The API wants tool_result blocks before any other content in a user message.
    if message["role"] != "user":
        return message
    results = [b for b in message["content"] if b.get("type") == "tool_result"]
    if not results or message["content"][: len(results)] == results:
        return message
    others = [b for b in message["content"] if b.get("type") != "tool_result"]
    return {"role": "user", "content": results + others}


def repair_pairing(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], PairingReport]:
    """Return repaired messages (alternating roles, results first) and what was fixed.

    Messages that need no repair come back equal to the input (list content assumed).
    """
    report = PairingReport()
    # Where each call lives, and the first result seen for each id (with its position).
    call_at: dict[str, int] = {}
    calls: list[list[dict[str, Any]]] = []
    for index, message in enumerate(messages):
        kept: list[dict[str, Any]] = []
        if message.get("role") == "assistant":
            for block in _blocks(message):
                if block.get("type") == "tool_use":
                    if block.get("id") in call_at:
                        report.duplicates_dropped += 1
                        continue
                    call_at[block.get("id", "")] = index
                kept.append(block)
        calls.append(kept)
    results: dict[str, tuple[int, dict[str, Any]]] = {}
    for index, message in enumerate(messages):
        if message.get("role") != "user":
            continue
        for block in _blocks(message):
            if block.get("type") != "tool_result":
                continue
            call_id = block.get("tool_use_id", "")
            if call_id not in call_at:
                report.orphans_dropped += 1
            elif call_id in results:
                report.duplicates_dropped += 1
            else:
                results[call_id] = (index, block)

    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            content = calls[index]
            if not content:
                continue
            out.append({"role": "assistant", "content": content})
            answers: list[dict[str, Any]] = []
            for block in content:
                if block.get("type") != "tool_use":
                    continue
                found = results.get(block.get("id", ""))
                if found is None:
                    report.synthesized += 1
                    answers.append(
                        {
                            "type": "tool_result",
                            "tool_use_id": block.get("id", ""),
                            "content": MISSING_RESULT,
                            "is_error": True,
                        }
                    )
                    continue
                if found[0] != index + 1:
                    report.moved += 1
                answers.append(found[1])
            if answers:
                out.append({"role": "user", "content": answers})
        else:
            others = [b for b in _blocks(message) if b.get("type") != "tool_result"]
            if others:
                out.append({"role": message.get("role", "user"), "content": others})
    repaired = [_results_first(m) for m in merge_same_role(out)]
    return repaired, report
