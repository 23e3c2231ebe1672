"""What a summary carries besides the model's text: the latest tool failures and the
workspace rules (AGENTS.md: how a session starts and its red lines), so neither is lost with
the history they appeared in.
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
# The sections of AGENTS.md a conversation must keep after compaction, in this order: how a
# session starts (which files to read first) and what must never happen.
CARRIED_SECTIONS = ("session startup", "red lines")
FALLBACK_SECTION = "rules"


def _section(agents_md: str, wanted: str) -> tuple[str, str] | None:
    """(heading, body) of the first sub-section whose heading contains `wanted`."""
    headings = list(_HEADING.finditer(agents_md))
    for index, match in enumerate(headings):
        level = len(match.group(1))
        # A level-1 title is the whole file ("# Operating rules"), not a section.
        if level < 2 or wanted not in match.group(2).lower():
            continue
        end = next(
            (h.start() for h in headings[index + 1 :] if len(h.group(1)) <= level),
            len(agents_md),
        )
        return match.group(2), agents_md[match.end() : end].strip()
    return None


def rules_section(agents_md: str) -> str:
    """The "Session Startup" and "Red Lines" sections of AGENTS.md (else the first
    sub-section about rules), each at most RULES_MAX_CHARS; one alone without its heading,
    both under their own."""
    found = [s for wanted in CARRIED_SECTIONS if (s := _section(agents_md, wanted))]
    if not found:
        fallback = _section(agents_md, FALLBACK_SECTION)
        found = [fallback] if fallback else []
    if len(found) == 1:
        return cut_head(found[0][1], RULES_MAX_CHARS)
    return "\n\n".join(
        f"### {heading}\n{cut_head(body, RULES_MAX_CHARS)}" for heading, body in found
    )
