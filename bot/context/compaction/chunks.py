"""Chunk planning: pack the summarizer's transcript into parts that fit one model call.

Chunks shrink when messages are large, so a chunk still holds several of them; a message
bigger than a whole chunk is summarized on its own when it fits half the window, and only
beyond that replaced by a note saying it was left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.config import ContextConfig
from bot.context.compaction.render import Item

# Chunks shrink from chunk_max_share toward chunk_min_share once the average message takes
# more than this share of the window, by this many points per point above it.
LARGE_MESSAGE_SHARE = 0.1
CHUNK_SHRINK_RATE = 2.5
# A message bigger than a chunk but at most this share of the window gets a chunk of its own.
ALONE_MAX_SHARE = 0.5


def chunk_share(items: Sequence[Item], window: int, config: ContextConfig) -> float:
    """The share of the window one chunk may fill: smaller when messages are large, so a
    chunk still holds several of them."""
    if not items:
        return config.chunk_max_share
    average = sum(i.tokens for i in items) / len(items) / window
    if average <= LARGE_MESSAGE_SHARE:
        return config.chunk_max_share
    shrunk = config.chunk_max_share - (average - LARGE_MESSAGE_SHARE) * CHUNK_SHRINK_RATE
    return max(config.chunk_min_share, shrunk)


def omitted_note(item: Item) -> Item:
    thousands = max(1, round(item.tokens / 1000))
    return Item(item.role, f"[Large {item.label} (~{thousands}K tokens) omitted]", omitted=True)


@dataclass(frozen=True, slots=True)
class ChunkPlan:
    chunks: list[list[Item]]
    omitted: int


def plan_chunks(items: Sequence[Item], window: int, config: ContextConfig) -> ChunkPlan:
    """Pack items into chunks of at most the chunk budget, in order. An item bigger than a
    whole chunk gets a chunk of its own when it fits `ALONE_MAX_SHARE` of the window, and is
    replaced by a note saying it was left out when it does not."""
    budget = int(window * chunk_share(items, window, config))
    alone_max = int(window * ALONE_MAX_SHARE)
    chunks: list[list[Item]] = []
    current: list[Item] = []
    used = omitted = 0
    for item in items:
        if item.tokens > budget:
            if item.tokens <= alone_max:
                if current:
                    chunks.append(current)
                chunks.append([item])
                current, used = [], 0
                continue
            item = omitted_note(item)
            omitted += 1
        if current and used + item.tokens > budget:
            chunks.append(current)
            current, used = [], 0
        current.append(item)
        used += item.tokens
    if current:
        chunks.append(current)
    return ChunkPlan(chunks, omitted)
