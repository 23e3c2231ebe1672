"""The summarizer: the model calls of one compaction, staged over chunks (one summary per
part, then a merge), with the quality guard's problems sent back as feedback for a retry.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from anthropic.types import MessageParam, TextBlockParam

from bot.context.compaction.chunks import ChunkPlan
from bot.context.compaction.guard import summary_problems
from bot.context.compaction.prompts import (
    CHUNK_PROMPT,
    FALLBACK_PART,
    FALLBACK_SUMMARY,
    IN_PLACE_PROMPT,
    MERGE_PROMPT,
    RETRY_PROMPT,
    SUMMARIZER_SYSTEM,
    focus_note,
    language_note,
    required_note,
)
from bot.context.compaction.render import transcript_text
from bot.context.host import CachedPrefix, SummaryModel
from bot.context.tool_pairing import merge_same_role
from bot.types import Usage
from bot.untrusted import wrap_untrusted

log = logging.getLogger(__name__)

SUMMARY_MAX_TOKENS = 4_096
SUMMARY_WINDOW_SHARE = 0.1  # small windows get proportionally shorter summaries


def summary_token_budget(window: int) -> int:
    return min(SUMMARY_MAX_TOKENS, int(window * SUMMARY_WINDOW_SHARE))


SUMMARIZER_BLOCKS: list[TextBlockParam] = [{"type": "text", "text": SUMMARIZER_SYSTEM}]


@dataclass(slots=True)
class Summarizer:
    """Runs the summarizer calls of one compaction and totals their usage. With a `prefix`
    every call extends the conversation's own request (its system prompt, tools and
    messages), so it reads the conversation's prompt cache."""

    model: SummaryModel
    max_tokens: int
    model_id: str  # the session's model: its own requests' cache is the one to read
    prefix: CachedPrefix | None = None
    usage: Usage = field(default_factory=Usage)
    answered_by: str = ""  # the model id the provider answered with
    calls: int = 0

    async def ask(self, messages: list[MessageParam]) -> str:
        prefix = self.prefix
        reply = await self.model.complete(
            system=prefix.system if prefix else SUMMARIZER_BLOCKS,
            tools=prefix.tools if prefix else None,
            messages=merge_same_role([*prefix.messages, *messages]) if prefix else messages,
            max_tokens=self.max_tokens,
            model=self.model_id,
        )
        self.calls += 1
        self.usage = self.usage + reply.usage
        self.answered_by = reply.model
        return reply.text.strip()


@dataclass(frozen=True, slots=True)
class SummaryRules:
    """What every summary of one compaction must satisfy, and how hard to try."""

    identifiers: Sequence[str]
    ask: str  # the latest user request, to be reflected
    focus: str  # the person's /compact focus ("" for none)
    marker: str  # the untrusted-data marker for quoted text
    retries: int
    language: str | None = None  # what the people write in, when their script names it


def _user(text: str) -> MessageParam:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


async def summarize(
    summarizer: Summarizer, plan: ChunkPlan, rules: SummaryRules
) -> tuple[str, list[str]]:
    """Staged summary with the quality guard. Returns (summary, problems left)."""
    marker = rules.marker
    focus_text = focus_note(rules.focus, marker)
    required = required_note(rules.identifiers)
    language = language_note(rules.language)
    substantive = [c for c in plan.chunks if any(not i.omitted for i in c)]
    if not substantive:
        return FALLBACK_SUMMARY, []
    if len(plan.chunks) == 1:
        final_prompt = CHUNK_PROMPT.format(
            part="this part",
            language=language,
            focus=focus_text,
            required=required,
            transcript=transcript_text(plan.chunks[0], marker),
        )
    else:
        partials = []
        for index, chunk in enumerate(plan.chunks, 1):
            prompt = CHUNK_PROMPT.format(
                part=f"part {index} of {len(plan.chunks)}",
                language=language,
                focus=focus_text,
                required="",
                transcript=transcript_text(chunk, marker),
            )
            partial = await summarizer.ask([_user(prompt)])
            partials.append(partial or FALLBACK_PART.format(count=len(chunk)))
        parts = "\n\n".join(f"### Part {i}\n{p}" for i, p in enumerate(partials, 1))
        final_prompt = MERGE_PROMPT.format(
            language=language,
            focus=focus_text,
            required=required,
            parts=wrap_untrusted(parts, source="partial-summaries", marker_id=marker),
        )
    return await _guarded(summarizer, final_prompt, rules)


async def summarize_in_place(
    summarizer: Summarizer, keep_turns: int, rules: SummaryRules
) -> tuple[str, list[str]]:
    """One summary asked at the end of the conversation itself (`summarizer.prefix`), with
    the quality guard. Returns (summary, problems left)."""
    prompt = IN_PLACE_PROMPT.format(
        keep=keep_turns,
        language=language_note(rules.language),
        focus=focus_note(rules.focus, rules.marker),
        required=required_note(rules.identifiers),
    )
    return await _guarded(summarizer, prompt, rules)


async def _guarded(
    summarizer: Summarizer, prompt: str, rules: SummaryRules
) -> tuple[str, list[str]]:
    """Ask for the summary, then again with the guard's problems as feedback."""
    identifiers, ask = rules.identifiers, rules.ask
    conversation: list[MessageParam] = [_user(prompt)]
    summary = await summarizer.ask(conversation)
    problems = summary_problems(summary, identifiers, ask, rules.marker)
    for _ in range(rules.retries):
        if not problems:
            break
        log.info("compaction summary rejected: %s", "; ".join(problems))
        conversation += [
            {"role": "assistant", "content": [{"type": "text", "text": summary or "(empty)"}]},
            _user(RETRY_PROMPT.format(problems="\n".join(f"- {p}" for p in problems))),
        ]
        summary = await summarizer.ask(conversation)
        problems = summary_problems(summary, identifiers, ask, rules.marker)
    return summary, problems
