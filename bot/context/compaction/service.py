"""The compaction service: `compact_session` runs one compaction end to end.

It is the one place that calls the summarizer and writes to the store. If a model call
fails, nothing is written and the history stays as it was.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Literal

from bot.context.cache_cost import DEFAULT_SUMMARY_TOKENS, WarmCompaction
from bot.context.compaction.carryover import RULES_FILE, rules_section, tool_failures
from bot.context.compaction.chunks import plan_chunks
from bot.context.compaction.guard import finalize_summary, latest_ask, required_identifiers
from bot.context.compaction.language import conversation_language
from bot.context.compaction.prompts import IN_PLACE_PROMPT, required_note
from bot.context.compaction.render import render_items
from bot.context.compaction.split import Split, choose_split
from bot.context.compaction.summarizer import (
    Summarizer,
    SummaryRules,
    summarize,
    summarize_in_place,
    summary_token_budget,
)
from bot.context.host import CachedPrefix, ContextHost
from bot.context.messages import build_messages
from bot.context.size import context_tokens
from bot.context.tokens import messages_tokens, text_units, tokens_for_chars
from bot.context.truncation import cap_tool_results, result_char_limit
from bot.errors import ModelError
from bot.sessions.window import session_limits
from bot.store.base import SessionRow
from bot.transcript import Compaction, Entry, is_person_turn, new_id
from bot.untrusted import marker_id_for

log = logging.getLogger(__name__)

CompactionReason = Literal["threshold", "manual", "overflow", "idle"]

# Kept turns may fill at most this share of (window - reserve); beyond it fewer are kept,
# so one compaction makes real room instead of triggering again on the next call.
KEPT_MAX_SHARE = 0.5


def needs_compaction(tokens: int, window: int, reserve: int) -> bool:
    """True when the context no longer leaves `reserve` tokens free in the window."""
    return tokens > window - reserve


@dataclass(frozen=True, slots=True)
class CompactionResult:
    status: Literal["compacted", "skipped", "failed"]
    reason: CompactionReason
    message: str  # one line a person can read (the /compact reply)
    entry: Entry | None = None  # the persisted compaction entry
    tokens_before: int = 0
    tokens_after: int = 0
    summarized: int = 0  # transcript messages folded into the summary
    omitted: int = 0  # oversized messages left out
    kept_turns: int = 0
    model_calls: int = 0
    problems: tuple[str, ...] = ()  # quality problems patched after the retries ran out
    paused: bool = False  # not tried: the session's compaction breaker is open
    timed_out: bool = False  # failed because it ran past context.compaction_timeout_seconds

    @property
    def compacted(self) -> bool:
        return self.status == "compacted"


def overhead_chars(host: ContextHost) -> int:
    """Characters of what precedes the messages: the system prompt and tool definitions."""
    system = host.workspace.system_blocks(is_direct=True)
    tools = host.tools.definitions(host.config.tools.allow, host.config.tools.deny)
    return sum(text_units(b.get("text", "")) for b in system) + len(json.dumps(tools))


def history_tokens(history: list[Entry], tz: str, result_limit: int, overhead: int) -> int:
    """The size of the request `history` makes, system prompt and tools included."""
    return context_tokens(
        history,
        cap_tool_results(build_messages(history, tz), result_limit),
        tz=tz,
        overhead_chars=overhead,
        result_limit=result_limit,
    )


def warm_cost(
    host: ContextHost, history: list[Entry], split: Split, *, result_limit: int, overhead: int
) -> WarmCompaction:
    """The price of compacting `history` at `split` in place, over its warm cache."""
    cfg, tz = host.config.context, host.config.agent.timezone
    identifiers = required_identifiers(render_items(split, tz, cfg))
    prompt = IN_PLACE_PROMPT + required_note(identifiers)
    previous = split.previous
    return WarmCompaction(
        context_tokens=history_tokens(history, tz, result_limit, overhead),
        kept_tokens=messages_tokens(
            cap_tool_results(build_messages(split.kept, tz), result_limit), overhead
        ),
        # The last summary is the best guess of the next one's length.
        summary_tokens=tokens_for_chars(text_units(previous.summary))
        if previous is not None
        else DEFAULT_SUMMARY_TOKENS,
        prompt_tokens=tokens_for_chars(text_units(prompt)),
        calls=1 + cfg.summary_retries,
    )


async def compact_session(
    host: ContextHost,
    session: SessionRow,
    *,
    focus: str = "",
    reason: CompactionReason = "manual",
    history: list[Entry] | None = None,
    tokens_before: int | None = None,
    max_keep_turns: int | None = None,
    prefix: CachedPrefix | None = None,
    only_if_cheaper: bool = False,
    timeout: float | None = None,
    model: str | None = None,
) -> CompactionResult:
    """Summarize `session`'s older history and persist a compaction entry.

    With `prefix` (the session's request as its turns send it, while its prompt cache is
    warm) and a history that fits the window, the summary is asked for at the end of that
    request in one call that reads the cache; otherwise the summarizer reads the rendered
    transcript in chunks. `only_if_cheaper` skips it unless it is warm and costs less than
    the next burst re-writing the history (`WarmCompaction.pays`). Every summarizer call
    uses the session's current model (the prefix's, which is the same), or `model` when a
    fallback model stands in for it (its window then sizes everything); `timeout` bounds
    them all together.

    Runs every `host.before_compaction` hook first (e.g. a memory flush). `history`
    defaults to the stored history; pass the turn's own when called mid-turn. Never raises
    for a model failure: the result says "failed" and the history is untouched. Call it in
    the session's lane (the queue), so no turn runs at the same time.
    """
    config = host.config
    cfg, tz = config.context, config.agent.timezone
    limits = session_limits(config, session, model)
    window = limits.window
    keep = min(cfg.keep_recent_user_turns, max_keep_turns or cfg.keep_recent_user_turns)
    limit = result_char_limit(window, cfg)
    overhead = overhead_chars(host)
    budget = int((window - cfg.reserve) * KEPT_MAX_SHARE) - tokens_for_chars(overhead)

    def split_of(entries: list[Entry]) -> Split:
        return choose_split(
            entries, keep_turns=keep, budget_tokens=budget, tz=tz, result_limit=limit
        )

    loaded = history or await host.store.load_history(session.session_id)
    probe = split_of(loaded)
    if not probe.summarize:
        return CompactionResult(
            "skipped",
            reason,
            f"Nothing to compact yet: only the last {keep} turn(s) are in the history, and "
            "those are always kept as they are.",
        )
    if only_if_cheaper:
        cost = warm_cost(host, loaded, probe, result_limit=limit, overhead=overhead)
        # Priced as one in-place call over the warm cache; anything else costs more.
        kept_turn = any(is_person_turn(e) for e in probe.kept)
        if prefix is None or not kept_turn or not cost.pays(config.anthropic.cache_ttl):
            return CompactionResult(
                "skipped",
                reason,
                f"Not compacted: re-writing ~{cost.context_tokens:,} tokens to the cache "
                "costs less than a summary.",
                tokens_before=cost.context_tokens,
            )
    for hook in host.before_compaction:
        try:
            await hook.before_compaction(session)
        except Exception:  # a failed flush must not stop the compaction that needs room
            log.exception("before-compaction hook failed for %s", session.session_key)
    if history is None:  # a hook may have added entries (a flush turn)
        history = await host.store.load_history(session.session_id)
    split = split_of(history)
    before = tokens_before or history_tokens(history, tz, limit, overhead)
    items = render_items(split, tz, cfg)
    identifiers = required_identifiers(items)
    ask = latest_ask(items)
    plan = plan_chunks(items, window, cfg)
    kept_turns = sum(1 for e in split.kept if is_person_turn(e))
    # In place needs the kept part to start at a person's turn, which the prompt can name.
    in_place = (
        prefix is not None and kept_turns > 0 and not needs_compaction(before, window, cfg.reserve)
    )
    summarizer = Summarizer(
        host.model,
        summary_token_budget(window),
        model_id=prefix.model if prefix is not None and in_place else limits.model,
        prefix=prefix if in_place else None,
    )
    rules = SummaryRules(
        identifiers=identifiers,
        ask=ask,
        focus=focus,
        marker=marker_id_for(new_id()),
        retries=cfg.summary_retries,
        language=conversation_language(i.ask for i in items if i.role == "user"),
    )
    try:
        async with asyncio.timeout(timeout):
            if in_place:
                summary, problems = await summarize_in_place(summarizer, kept_turns, rules)
            else:
                summary, problems = await summarize(summarizer, plan, rules)
    except (ModelError, TimeoutError) as exc:
        timed_out = isinstance(exc, TimeoutError)
        why = f"it took longer than {timeout:g} s" if timed_out and timeout else str(exc)
        log.warning("compaction of %s cancelled: %s", session.session_key, why)
        return CompactionResult(
            "failed",
            reason,
            f"Compaction failed ({why}); the history is unchanged.",
            tokens_before=before,
            model_calls=summarizer.calls,
            timed_out=timed_out,
        )
    agents_md = host.workspace.read_text(RULES_FILE) or ""
    summary = finalize_summary(
        summary,
        identifiers=identifiers,
        failures=tool_failures(items),
        rules=rules_section(agents_md),
    )
    compaction = Compaction(
        summary=summary,
        first_kept_entry_id=split.kept[0].id,
        reason=reason,
        tokens_before=before,
        summarized_messages=len(items),
        omitted_messages=0 if in_place else plan.omitted,
    )
    entry = Entry(session.session_id, compaction)
    after_messages = cap_tool_results(build_messages([entry, *split.kept], tz), limit)
    after = messages_tokens(after_messages, overhead)
    compaction.tokens_after = after
    await host.store.append_entries([entry])
    await host.store.count_compaction(session.session_id)
    # The time of the last model call tracks the conversation's own prompt cache: only an
    # in-place summary read (and so refreshed) it; the transcript summarizer's do not.
    await host.accountant.charge(
        session.session_id,
        summarizer.usage,
        summarizer.answered_by or summarizer.model_id,
        read_cache=in_place,
        context_tokens=after,
    )
    log.info(
        "compacted %s (%s): ~%d -> ~%d tokens, %d messages summarized in %d call(s)",
        session.session_key,
        reason,
        before,
        after,
        len(items),
        summarizer.calls,
    )
    return CompactionResult(
        "compacted",
        reason,
        f"Compacted {len(items)} earlier messages into a summary (~{before:,} -> ~{after:,} "
        f"tokens); the last {kept_turns} turn(s) are kept as they were.",
        entry=entry,
        tokens_before=before,
        tokens_after=after,
        summarized=len(items),
        omitted=0 if in_place else plan.omitted,
        kept_turns=kept_turns,
        model_calls=summarizer.calls,
        problems=tuple(problems),
    )
