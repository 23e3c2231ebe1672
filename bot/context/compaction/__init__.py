"""Compaction: replace older history with a sectioned summary, keeping the latest user turns.

One module per step: `split` (what is summarized vs kept), `render` (the transcript the
summarizer reads), `chunks` (parts that fit one call), `guard` (required sections,
identifiers, latest request), `carryover` (tool failures, workspace rules), `prompts`,
`summarizer` (model calls with retry) and `service` (`compact_session`, the only I/O).
"""

from bot.context.compaction.prompts import FOCUS_MAX_CHARS, SUMMARIZER_SYSTEM
from bot.context.compaction.service import (
    CompactionReason,
    CompactionResult,
    compact_session,
    needs_compaction,
    overhead_chars,
)

__all__ = [
    "FOCUS_MAX_CHARS",
    "SUMMARIZER_SYSTEM",
    "CompactionReason",
    "CompactionResult",
    "compact_session",
    "needs_compaction",
    "overhead_chars",
]
