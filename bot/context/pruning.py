"""Cache-TTL pruning: shrink old tool results, but only when the prompt cache has expired.

Changing an old message changes the cached prefix, which is free only once the provider has
dropped that prefix anyway. So decisions are made only when the session's last model call
is older than the cache TTL, kept in the session's context plan (tool_use id -> action,
and older copies of repeated reads) and re-applied on every later request, which keeps the
prompt byte-identical while the cache is warm again. Only requests change: the transcript
keeps every original result.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from anthropic.types import ContentBlockParam, MessageParam, ToolResultBlockParam

from bot.config import ContextConfig
from bot.context.blocks import content_blocks, make_message, result_blocks, result_text
from bot.context.plan import ContextPlan, PruneAction
from bot.context.rereads import read_calls, superseded_note
from bot.context.tokens import plain_tokens_for_chars

PrunePlan = Mapping[str, PruneAction]

CLEARED_TEXT = "[Old tool result content cleared]"
TRIM_SEPARATOR = "\n...\n"
TRIM_NOTE = "\n[Old tool result trimmed to its first and last part; it had {total:,} characters.]"


def cache_is_cold(last_call_at: float | None, now: float, ttl_seconds: float) -> bool:
    """True when the provider has certainly dropped the session's cached prefix."""
    return last_call_at is None or now - last_call_at >= ttl_seconds


def has_image(block: ToolResultBlockParam) -> bool:
    return any(b["type"] == "image" for b in result_blocks(block))


def trim_text(text: str, head: int, tail: int) -> str:
    """First `head` + `...` + last `tail` characters, with a note of the original size."""
    if len(text) <= head + tail:
        return text
    # Slice the tail by index: text[-0:] would be the whole text.
    return (
        text[:head] + TRIM_SEPARATOR + text[len(text) - tail :] + TRIM_NOTE.format(total=len(text))
    )


def _pruned_size(text: str, action: PruneAction | None, config: ContextConfig) -> int:
    if action == "clear":
        return len(CLEARED_TEXT)
    if action == "trim":
        return len(trim_text(text, config.prune_head_chars, config.prune_tail_chars))
    return len(text)


def prunable_tool(name: str, allow: Sequence[str], deny: Sequence[str]) -> bool:
    """Pruning's tool globs: case-insensitive, an empty allow list admits every tool, and
    deny wins."""
    lowered = name.lower()
    if any(fnmatch.fnmatchcase(lowered, pattern.lower()) for pattern in deny):
        return False
    return not allow or any(fnmatch.fnmatchcase(lowered, pattern.lower()) for pattern in allow)


def tool_names_by_id(messages: list[MessageParam]) -> dict[str, str]:
    return {
        b["id"]: b["name"]
        for m in messages
        if m["role"] == "assistant"
        for b in content_blocks(m)
        if b["type"] == "tool_use"
    }


def prunable_results(
    messages: list[MessageParam], config: ContextConfig
) -> list[ToolResultBlockParam]:
    """The tool_result blocks pruning may touch, oldest first.

    Never results at or before the first user message, never those of the last
    `prune_keep_last_assistants` assistant messages, never results carrying images, and
    only tools the allow/deny globs admit (`prunable_tool`).
    """
    first_user = next(
        (
            i
            for i, m in enumerate(messages)
            if m["role"] == "user" and any(b["type"] != "tool_result" for b in content_blocks(m))
        ),
        None,
    )
    if first_user is None:
        return []
    assistants = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    keep = config.prune_keep_last_assistants
    if keep and len(assistants) < keep:
        return []
    # Results answering one of the protected assistant messages sit after the oldest of them.
    cutoff = assistants[-keep] if keep else len(messages)
    names = tool_names_by_id(messages)
    found: list[ToolResultBlockParam] = []
    for index in range(first_user + 1, cutoff):
        message = messages[index]
        if message["role"] != "user":
            continue
        for block in content_blocks(message):
            if block["type"] != "tool_result" or has_image(block):
                continue
            name = names.get(block["tool_use_id"], "")
            if prunable_tool(name, config.prune_tools_allow, config.prune_tools_deny):
                found.append(block)
    return found


@dataclass(frozen=True, slots=True)
class PruneOutcome:
    plan: dict[str, PruneAction]
    removed_chars: int  # characters the new decisions remove compared with the old plan


def plan_pruning(
    messages: list[MessageParam],
    *,
    tokens: int,
    window: int,
    config: ContextConfig,
    plan: PrunePlan,
    skip: Collection[str] = (),
) -> PruneOutcome:
    """Extend `plan` for a cold cache: soft-trim long results once context exceeds the soft
    ratio; hard-clear (oldest first, until under the hard ratio) once it exceeds the hard
    ratio and enough prunable text exists. Decisions already in `plan` are kept; results in
    `skip` (already replaced by a note) are left alone."""
    new_plan: dict[str, PruneAction] = dict(plan)
    if tokens <= window * config.prune_soft_ratio:
        return PruneOutcome(new_plan, 0)
    eligible = [
        (b["tool_use_id"], result_text(b))
        for b in prunable_results(messages, config)
        if b["tool_use_id"] not in skip
    ]
    removed = 0
    for call_id, text in eligible:
        if call_id not in new_plan and len(text) > config.prune_soft_trim_min_chars:
            new_plan[call_id] = "trim"
            removed += len(text) - _pruned_size(text, "trim", config)
    remaining = tokens - plain_tokens_for_chars(removed)
    prunable_chars = sum(len(text) for _, text in eligible)
    if (
        remaining > window * config.prune_hard_ratio
        and prunable_chars >= config.prune_min_prunable_chars
    ):
        for call_id, text in eligible:
            if new_plan.get(call_id) == "clear":
                continue
            before = _pruned_size(text, new_plan.get(call_id), config)
            new_plan[call_id] = "clear"
            delta = before - len(CLEARED_TEXT)
            removed += delta
            remaining -= plain_tokens_for_chars(delta)
            if remaining <= window * config.prune_hard_ratio:
                break
    return PruneOutcome(new_plan, removed)


def apply_pruning(
    messages: list[MessageParam], plan: ContextPlan, config: ContextConfig
) -> list[MessageParam]:
    """`messages` with the plan's pruning applied: older copies of repeated reads become a
    note naming the newer one, trimmed and cleared results shrink (new objects only where
    something changed)."""
    actions, superseded = plan.actions, plan.superseded
    if not actions and not superseded:
        return messages
    reads = read_calls(messages) if superseded else {}
    out: list[MessageParam] = []
    for message in messages:
        blocks = content_blocks(message)
        if message["role"] != "user" or not any(
            b["type"] == "tool_result"
            and (b["tool_use_id"] in actions or b["tool_use_id"] in superseded)
            for b in blocks
        ):
            out.append(message)
            continue
        new_blocks: list[ContentBlockParam] = []
        for block in blocks:
            if block["type"] == "tool_result" and not has_image(block):
                call_id = block["tool_use_id"]
                newer, action = superseded.get(call_id), actions.get(call_id)
                if newer is not None:
                    block = {**block, "content": superseded_note(reads.get(call_id), newer)}
                elif action is not None:
                    text = result_text(block)
                    block = {
                        **block,
                        "content": CLEARED_TEXT
                        if action == "clear"
                        else trim_text(text, config.prune_head_chars, config.prune_tail_chars),
                    }
            new_blocks.append(block)
        out.append(make_message("user", new_blocks))
    return out
