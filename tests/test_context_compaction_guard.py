"""The quality guard: required identifiers, problems fed back, and the final patch."""

from __future__ import annotations

from bot.config import ContextConfig
from bot.context.compaction.carryover import (
    MAX_TOOL_FAILURES,
    RULES_SECTION,
    TOOL_FAILURES_SECTION,
    tool_failures,
)
from bot.context.compaction.guard import (
    EMPTY_SECTION,
    IDENTIFIERS_SECTION,
    MAX_REQUIRED_IDENTIFIERS,
    REQUIRED_SECTIONS,
    TOOL_IDENTIFIER_BUDGET,
    finalize_summary,
    reflects_ask,
    required_identifiers,
    summary_problems,
)
from bot.context.compaction.prompts import FALLBACK_SUMMARY
from bot.context.compaction.render import Item, render_items
from bot.context.compaction.split import Split
from tests import entries

MARKER = "m1"

GOOD = "\n".join(f"{h}\n- none" for h in REQUIRED_SECTIONS)


def test_required_identifiers_put_what_people_wrote_first() -> None:
    items = [
        Item("tool", "log at /var/log/app/a.log"),
        Item("assistant", "I used deploy 9f3a2c1b7e"),
        Item("summary", "server 10.0.0.1:22"),
        Item("user", "order 20481937 please"),
    ]
    assert required_identifiers(items) == [
        "20481937",
        "9f3a2c1b7e",
        "10.0.0.1:22",
        "/var/log/app/a.log",
    ]


def test_tool_output_adds_only_a_few_identifiers_newest_first() -> None:
    old_log = Item("tool", " ".join(f"/srv/old/f{i}.txt" for i in range(20)))
    new_log = Item("tool", " ".join(f"/srv/new/f{i}.txt" for i in range(20)))
    found = required_identifiers([old_log, Item("user", "see INC-4821"), new_log])
    assert found[0] == "INC-4821"
    assert found[1:] == [f"/srv/new/f{i}.txt" for i in range(TOOL_IDENTIFIER_BUDGET)]


def test_problems_name_missing_sections_identifiers_and_the_request() -> None:
    ask = "Please rename the staging bucket before Friday"
    assert summary_problems(GOOD + "\n- staging bucket rename", ["abc12345"], "", MARKER) == [
        "these identifiers must appear exactly as written: abc12345"
    ]
    no_decisions = GOOD.replace("## Decisions\n", "")
    problems = summary_problems(no_decisions, [], "", MARKER)
    assert problems == ["missing section headings: ## Decisions"]
    assert summary_problems(GOOD, [], ask, MARKER)[0].startswith("the latest user request")
    assert summary_problems(GOOD + "\n- rename staging bucket by Friday", [], ask, MARKER) == []


def test_the_request_check_works_for_scripts_without_spaces() -> None:
    assert reflects_ask("## Pending user asks\n- 把报告发给老板", "请把周报发给老板")
    assert not reflects_ask("## Pending user asks\n- none", "请把周报发给老板")
    assert reflects_ask("anything", "ok")  # nothing to check in a two-letter ask


def test_a_patched_identifier_survives_the_next_compactions_cap() -> None:
    # The model dropped the planted URL; a summary already lists many tool-log ids (each
    # pass adds some). The next compaction must still require the URL.
    noise = [f"/var/lib/app/x/{i}.dat" for i in range(MAX_REQUIRED_IDENTIFIERS + 5)]
    summary = GOOD + "".join(f"\n- {n}" for n in noise)
    url = "https://grafana.example.com/d/4f7a9c/latency"
    final = finalize_summary(summary, identifiers=[*noise, url], failures=[], rules="")
    assert url in final.split(IDENTIFIERS_SECTION)[1]
    assert url in required_identifiers([Item("summary", final)])


def test_finalize_guarantees_sections_and_identifiers() -> None:
    summary = "## Decisions\n- use tea\n\n## Exact identifiers\n- abc12345\n\n## Open TODOs\n- x"
    final = finalize_summary(summary, identifiers=["abc12345", "/srv/a/b"], failures=[], rules="")
    for heading in REQUIRED_SECTIONS:
        assert heading in final
    section = final.split(IDENTIFIERS_SECTION)[1].split("## Open TODOs")[0]
    assert "- abc12345" in section and "- /srv/a/b" in section
    assert f"## Constraints/Rules\n{EMPTY_SECTION}" in final
    assert finalize_summary("", identifiers=[], failures=[], rules="").startswith(FALLBACK_SUMMARY)


def test_finalize_appends_tool_failures_and_rules() -> None:
    failures = tool_failures(
        [Item("tool", f"[x failed]\nerror {i}", tool="x", is_error=True) for i in range(12)]
    )
    assert len(failures) == MAX_TOOL_FAILURES and failures[-1] == "- x: error 11"
    final = finalize_summary(GOOD, identifiers=[], failures=failures, rules="- never")
    assert final.index(TOOL_FAILURES_SECTION) < final.index(RULES_SECTION)
    assert final.endswith(f"{RULES_SECTION}\n- never")


def test_a_tool_calls_arguments_rank_with_tool_output_not_with_what_was_said() -> None:
    page = {"id": "6468e851a848", "from_line": 201, "lines": 200}
    call = {"type": "tool_use", "id": "t1", "name": "read_tool_result", "input": page}
    said = entries.text("The budget sheet is ~/reports/q3-budget.xlsx")
    summarized = [
        entries.person("what does the report say?"),
        entries.reply(said, call),
        entries.results({"type": "tool_result", "tool_use_id": "t1", "content": "lines"}),
    ]
    previous = entries.summary("## Exact identifiers\n- OPS-4821").payload
    items = render_items(Split(previous, summarized, []), "UTC", ContextConfig())  # type: ignore[arg-type]
    # The call still reaches the summarizer's transcript...
    assert any("[called read_tool_result" in i.text for i in items)
    # ...but its kept-result id ranks after what was said and what summaries kept.
    assert required_identifiers(items) == ["~/reports/q3-budget.xlsx", "OPS-4821", "6468e851a848"]
