"""The quality guard: a summary must carry five sections, every required identifier
verbatim and the latest request. `summary_problems` says what is wrong (the retry feedback);
`finalize_summary` patches what is still missing once the retries ran out.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence

from bot.context.compaction.carryover import RULES_SECTION, TOOL_FAILURES_SECTION
from bot.context.compaction.prompts import FALLBACK_SUMMARY
from bot.context.compaction.render import Item
from bot.context.identifiers import extract_identifiers, missing_identifiers
from bot.context.truncation import cut_head
from bot.untrusted import wrap_untrusted

REQUIRED_SECTIONS = (
    "## Decisions",
    "## Open TODOs",
    "## Constraints/Rules",
    "## Pending user asks",
    "## Exact identifiers",
)
IDENTIFIERS_SECTION = "## Exact identifiers"
EMPTY_SECTION = "- none recorded"
# A summary that lists every path of every log it saw stops being a summary: the
# identifiers people and the assistant wrote are required, tool output adds only a few.
MAX_REQUIRED_IDENTIFIERS = 40
TOOL_IDENTIFIER_BUDGET = 8
# The latest request counts as reflected when this share of its words recur in the summary.
ASK_MIN_OVERLAP = 0.25
ASK_MIN_WORD_CHARS = 4
ASK_PREVIEW_CHARS = 300


def required_identifiers(items: Sequence[Item]) -> list[str]:
    """Identifiers the summary must keep, most important first: what people wrote, what
    the assistant said, what earlier summaries kept, then a few from the newest tool calls
    and output (a log can hold hundreds, and a call's arguments are the assistant's
    working, such as the id of a kept result it paged through; the ones that mattered were
    usually said again by someone)."""
    found: list[str] = []
    for role in ("user", "assistant", "summary"):
        for item in items:
            if item.role == role:
                said = item.text
                for call in item.calls.splitlines():
                    said = said.replace(call, "")
                found.extend(extract_identifiers(said))
    from_tools: list[str] = []
    for item in reversed(items):
        working = item.text if item.role == "tool" else item.calls
        if working and len(from_tools) < TOOL_IDENTIFIER_BUDGET:
            from_tools.extend(extract_identifiers(working))
    found.extend(from_tools[:TOOL_IDENTIFIER_BUDGET])
    return list(dict.fromkeys(found))[:MAX_REQUIRED_IDENTIFIERS]


def latest_ask(items: Sequence[Item]) -> str:
    return next((i.ask for i in reversed(items) if i.role == "user" and i.ask.strip()), "")


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_WORD = re.compile(r"\w+")


def ask_terms(text: str) -> set[str]:
    """Words that carry a request's meaning: longer words, and character pairs for scripts
    written without spaces."""
    terms: set[str] = set()
    for word in _WORD.findall(text.lower()):
        if _CJK.search(word):
            chars = [c for c in word if _CJK.match(c)]
            terms.update(a + b for a, b in itertools.pairwise(chars))
        elif len(word) >= ASK_MIN_WORD_CHARS:
            terms.add(word)
    return terms


def reflects_ask(summary: str, ask: str) -> bool:
    terms = ask_terms(ask)
    if not terms:
        return True
    lowered = summary.lower()
    hits = sum(1 for t in terms if t in lowered)
    return hits >= max(1, math.ceil(len(terms) * ASK_MIN_OVERLAP))


def has_section(summary: str, heading: str) -> bool:
    return re.search(rf"^{re.escape(heading)}\s*$", summary, re.MULTILINE) is not None


def summary_problems(summary: str, identifiers: Sequence[str], ask: str, marker: str) -> list[str]:
    """Why a summary is not acceptable yet (empty when it is). The latest request is
    quoted between untrusted markers (`marker`): a person wrote it."""
    problems = []
    missing_sections = [h for h in REQUIRED_SECTIONS if not has_section(summary, h)]
    if missing_sections:
        problems.append("missing section headings: " + ", ".join(missing_sections))
    missing = missing_identifiers(summary, list(identifiers))
    if missing:
        problems.append("these identifiers must appear exactly as written: " + ", ".join(missing))
    if ask and not reflects_ask(summary, ask):
        quoted = wrap_untrusted(
            cut_head(ask, ASK_PREVIEW_CHARS), source="latest-request", marker_id=marker
        )
        problems.append(
            "the latest user request (quoted below) is not reflected under "
            f"## Pending user asks:\n{quoted}"
        )
    return problems


def _insert_identifiers(summary: str, identifiers: Sequence[str]) -> str:
    """`identifiers` listed first under the identifiers heading. First, because the next
    compaction reads a summary's identifiers in text order and keeps at most
    MAX_REQUIRED_IDENTIFIERS: one the model dropped must not fall behind the tool-output
    ids every pass adds."""
    lines = "\n".join(f"- {value}" for value in identifiers)
    match = re.search(rf"^{re.escape(IDENTIFIERS_SECTION)}[ \t]*$", summary, re.MULTILINE)
    if match is None:
        return f"{summary}\n\n{IDENTIFIERS_SECTION}\n{lines}"
    head, tail = summary[: match.end()], summary[match.end() :].lstrip("\n")
    return f"{head}\n{lines}\n{tail}" if tail else f"{head}\n{lines}"


def finalize_summary(
    summary: str,
    *,
    identifiers: Sequence[str],
    failures: Sequence[str],
    rules: str,
) -> str:
    """Guarantee the five sections and every required identifier, then append recent tool
    failures and the workspace rules so neither is lost with the history."""
    text = summary.strip() or FALLBACK_SUMMARY
    for heading in REQUIRED_SECTIONS:
        if not has_section(text, heading):
            text += f"\n\n{heading}\n{EMPTY_SECTION}"
    missing = missing_identifiers(text, list(identifiers))
    if missing:
        text = _insert_identifiers(text, missing)
    if failures:
        text += f"\n\n{TOOL_FAILURES_SECTION}\n" + "\n".join(failures)
    if rules:
        text += f"\n\n{RULES_SECTION}\n{rules}"
    return text
