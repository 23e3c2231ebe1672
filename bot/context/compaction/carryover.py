"""What a summary carries besides the model's text: the latest tool failures and the
workspace rules (AGENTS.md), so neither is lost with the history they appeared in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.context.compaction.render import Item
from bot.context.truncation import cut_head

TOOL_FAILURES_SECTION = "## Tool failures"
RULES_SECTION = "## Rules (from AGENTS.md)"
RULES_FILE = "AGENTS.md"
MAX_TOOL_FAILURES = 8
TOOL_FAILURE_CHARS = 240
RULES_MAX_CHARS = 2_000


def tool_failures(items: Sequence[Item]) -> list[str]:
    failures = [i for i in items if i.role == "tool" and i.is_error]
    lines = []
    for item in failures[-MAX_TOOL_FAILURES:]:
        body = item.text.partition("\n")[2].strip().replace("\n", " ")
        lines.append(f"- {item.tool}: {cut_head(body, TOOL_FAILURE_CHARS)}")
    return lines


_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$", re.MULTILINE)


def rules_section(agents_md: str) -> str:
    """The "Red Lines" section of AGENTS.md (else the first sub-section about rules), at
    most RULES_MAX_CHARS, without its heading."""
    headings = list(_HEADING.finditer(agents_md))
    for wanted in ("red lines", "rules"):
        for index, match in enumerate(headings):
            level = len(match.group(1))
            # A level-1 title is the whole file ("# Operating rules"), not a section.
            if level < 2 or wanted not in match.group(2).lower():
                continue
            end = next(
                (h.start() for h in headings[index + 1 :] if len(h.group(1)) <= level),
                len(agents_md),
            )
            body = agents_md[match.end() : end].strip()
            return cut_head(body, RULES_MAX_CHARS)
    return ""
