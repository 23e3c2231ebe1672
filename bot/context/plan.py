"""A session's context plan: every decision that changes how its history renders into a
request, kept in the store so every replica builds the same request for the same session.

The decisions are made only when changing the prompt prefix costs nothing (the cache is
cold) or when there is no other way to stay under the window (compaction failed or is
paused); in between they are re-applied as they are, which keeps the prefix byte-identical
while the cache is warm, whichever process answers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, cast

PruneAction = Literal["trim", "clear"]
PLAN_VERSION = 1


@dataclass(slots=True)
class ContextPlan:
    # The plan belongs to the history after this compaction entry (None: from the start);
    # a new compaction replaces what it covered, and with it the plan.
    compaction_id: str | None = None
    # Pruning: tool_use id -> how its old result is shortened.
    actions: dict[str, PruneAction] = field(default_factory=dict)
    # Repeated reads: tool_use id of an older copy -> tool_use id of the newest one.
    superseded: dict[str, str] = field(default_factory=dict)
    # Old images shown as `[image: ...]` text (their krill-media links).
    placeholders: set[str] = field(default_factory=set)
    # The first entry a request still carries after older turns were left out because
    # compaction could not run (None: nothing is left out).
    cut_entry_id: str | None = None

    def start_over(self, compaction_id: str | None) -> None:
        """Forget every decision: a compaction replaced the history they were about."""
        self.compaction_id = compaction_id
        self.actions, self.superseded = {}, {}
        self.placeholders, self.cut_entry_id = set(), None

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": PLAN_VERSION,
                "compaction_id": self.compaction_id,
                "actions": self.actions,
                "superseded": self.superseded,
                "placeholders": sorted(self.placeholders),
                "cut_entry_id": self.cut_entry_id,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str | None) -> ContextPlan:
        """The stored plan; an empty one for None or for text this version cannot read
        (the next cold request plans again, which costs one cache write at most)."""
        if not text:
            return cls()
        try:
            data: dict[str, Any] = json.loads(text)
            if data.get("version") != PLAN_VERSION:
                return cls()
            actions = {
                str(k): cast(PruneAction, v)
                for k, v in data.get("actions", {}).items()
                if v in ("trim", "clear")
            }
            return cls(
                compaction_id=data.get("compaction_id"),
                actions=actions,
                superseded={str(k): str(v) for k, v in data.get("superseded", {}).items()},
                placeholders={str(p) for p in data.get("placeholders", [])},
                cut_entry_id=data.get("cut_entry_id"),
            )
        except (ValueError, AttributeError, TypeError):
            return cls()
