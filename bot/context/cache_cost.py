"""What the provider's prompt cache charges relative to plain input, and the decision those
prices make: whether compacting an idle session before its cache expires costs less than
letting the next burst of messages re-write its whole history to the cache.

Above `context.warm_compaction_tokens` a session is always compacted warm; below it the
price decides (`WarmCompaction.pays`), so a history that is cheap to summarize from the
cache but dear to re-write is compacted too, and a small one is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

# Multipliers on the input price (Anthropic's list prices for every Claude model).
CACHE_READ_MULTIPLIER = 0.1
CACHE_WRITE_MULTIPLIER = {"5m": 1.25, "1h": 2.0}
OUTPUT_MULTIPLIER = 5.0  # output costs five times input for every model Krill prices
# Requests of the next burst after its first that read the smaller prompt. Counted low on
# purpose (a burst of turns with tool rounds usually has more), so the estimate is modest.
LATER_REQUESTS = 2
# The summary length assumed while a session has no summary of its own to go by.
DEFAULT_SUMMARY_TOKENS = 1_000


@dataclass(frozen=True, slots=True)
class WarmCompaction:
    """A warm compaction priced before it runs, in estimated tokens."""

    context_tokens: int  # the request now: system prompt, tools and messages
    kept_tokens: int  # what the compacted request keeps besides the summary (system
    # prompt, tools and the turns kept verbatim)
    summary_tokens: int  # the summary expected
    prompt_tokens: int  # the compaction request's own prompt (rules, identifiers)
    calls: int  # summarizer calls if every quality retry runs

    def saving(self, cache_ttl: str) -> float:
        """Input-token equivalents saved by compacting now (negative: lost).

        Without it, the next burst's first request writes the whole context to the cache
        again and its later requests read it all. With it, each summarizer call reads the
        context from the cache and writes its prompt and a summary, and the next burst
        writes and reads only the summary and the kept part."""
        write = CACHE_WRITE_MULTIPLIER[cache_ttl]
        removed = self.context_tokens - self.kept_tokens - self.summary_tokens
        gain = removed * (write + LATER_REQUESTS * CACHE_READ_MULTIPLIER)
        per_call = (
            self.context_tokens * CACHE_READ_MULTIPLIER
            + self.prompt_tokens * write
            + self.summary_tokens * OUTPUT_MULTIPLIER
        )
        return gain - self.calls * per_call

    def pays(self, cache_ttl: str) -> bool:
        return self.saving(cache_ttl) > 0
