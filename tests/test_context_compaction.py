"""Compaction's pure steps: split, render, chunk, check and finalize a summary."""

from __future__ import annotations

from bot.config import ContextConfig
from bot.context.compaction import (
    EMPTY_SECTION,
    FALLBACK_SUMMARY,
    IDENTIFIERS_SECTION,
    MAX_TOOL_FAILURES,
    REQUIRED_SECTIONS,
    RULES_MAX_CHARS,
    RULES_SECTION,
    TOOL_FAILURES_SECTION,
    TOOL_IDENTIFIER_BUDGET,
    Item,
    choose_split,
    chunk_share,
    finalize_summary,
    latest_ask,
    needs_compaction,
    plan_chunks,
    reflects_ask,
    render_items,
    required_identifiers,
    rules_section,
    split_history,
    summary_problems,
    tool_failures,
)
from bot.transcript import Entry, PersonTurn, PromptPurpose, is_person_turn
from tests import entries as build

CFG = ContextConfig()
GOOD = "\n".join(f"{h}\n- none" for h in REQUIRED_SECTIONS)


def user(text: str, turn: str = "") -> Entry:
    return build.person(text, turn_id=turn)


def internal(text: str, turn: str) -> Entry:
    return build.prompt(text, purpose=PromptPurpose.FLUSH, turn_id=turn)


def reply(text: str, turn: str = "") -> Entry:
    return build.reply(build.text(text), turn_id=turn)


def call(call_id: str, name: str = "fetch") -> Entry:
    return build.reply({"type": "tool_use", "id": call_id, "name": name, "input": {"q": 1}})


def result(call_id: str, text: str, error: bool = False) -> Entry:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": error}
    return build.results(block)


def first_text(entry: Entry) -> str:
    assert isinstance(entry.payload, PersonTurn)
    return entry.payload.messages[0].text


def turns(n: int) -> list[Entry]:
    history: list[Entry] = []
    for i in range(n):
        history += [user(f"question {i}"), call(f"c{i}"), result(f"c{i}", f"data {i}")]
        history.append(reply(f"answer {i}"))
    return history


def test_threshold_is_window_minus_reserve() -> None:
    assert not needs_compaction(180_000, 200_000, 20_000)
    assert needs_compaction(180_001, 200_000, 20_000)


def test_split_keeps_the_last_turns_with_their_tool_results() -> None:
    history = turns(5)
    split = split_history(history, 3)
    assert split.summarize == history[:8] and split.kept == history[8:]
    assert first_text(split.kept[0]) == "question 2"
    previous = build.summary("old")
    assert split_history([previous, *history], 3).previous is previous.payload


def test_nothing_to_summarize_without_enough_user_turns() -> None:
    assert split_history(turns(3), 3).summarize == []
    no_user = [reply("hello"), call("c"), result("c", "x")]
    assert split_history(no_user, 3).summarize == []
    # Internal prompts (memory flush) are not turns a person started.
    flush = [internal("flush now", "f1"), reply("NO_REPLY", "f1")]
    assert split_history([*turns(2), *flush, *turns(1)], 3).summarize == []


def test_fewer_turns_are_kept_when_they_would_not_fit() -> None:
    history = [*turns(3), user("big"), call("b"), result("b", "x" * 40_000), reply("ok")]
    split = choose_split(history, keep_turns=3, budget_tokens=5_000, tz="UTC", result_limit=10**6)
    assert first_text(split.kept[0]) == "big"  # one turn, over budget
    roomy = choose_split(history, keep_turns=3, budget_tokens=10**6, tz="UTC", result_limit=10**6)
    assert len([e for e in roomy.kept if is_person_turn(e)]) == 3


def test_render_labels_messages_and_skips_housekeeping() -> None:
    previous = build.summary("## Decisions\n- tea")
    history = [
        previous,
        user("find the report"),
        call("c1", "search"),
        result("c1", "boom", error=True),
        internal("store memories", "f"),
        reply("NO_REPLY", "f"),
        reply("it failed"),
        *turns(3),
    ]
    items = render_items(split_history(history, 3), "UTC", CFG)
    assert [i.role for i in items] == ["summary", "user", "assistant", "tool", "assistant"]
    assert items[1].text.endswith("Al: find the report") and items[1].ask == "find the report"
    assert items[2].text == '[called search {"q": 1}]'
    assert items[3].is_error and items[3].tool == "search"
    assert latest_ask(items) == "find the report"
    assert tool_failures(items) == ["- search: boom"]


def test_long_tool_results_are_read_as_head_and_tail() -> None:
    log = "\n".join(f"line {i:05d}" for i in range(2_000))
    split = split_history([user("read"), call("c"), result("c", log), *turns(3)], 3)
    (tool_item,) = [i for i in render_items(split, "UTC", CFG) if i.role == "tool"]
    body = tool_item.text.partition("\n")[2]
    assert body.startswith(log[:1500]) and log[-1500:] in body and len(body) < 3_200


def test_chunks_shrink_for_large_messages_and_oversized_ones_are_omitted() -> None:
    small = [Item("user", "x" * 400) for _ in range(10)]
    assert chunk_share(small, 10_000, CFG) == CFG.chunk_max_share
    large = [Item("tool", "x" * 6_000) for _ in range(4)]  # ~1.8k tokens: 18% of 10k
    assert CFG.chunk_min_share <= chunk_share(large, 10_000, CFG) < CFG.chunk_max_share
    huge = [Item("tool", "x" * 40_000) for _ in range(2)]
    assert chunk_share(huge, 10_000, CFG) == CFG.chunk_min_share

    items = [Item("user", "a" * 4_000), Item("tool", "b" * 20_000), Item("user", "c" * 4_000)]
    plan = plan_chunks(items, 10_000, CFG)
    assert plan.omitted == 1
    flat = [i for chunk in plan.chunks for i in chunk]
    assert flat[1].omitted and flat[1].text == "[Large tool result (~6K tokens) omitted]"
    budget = 10_000 * chunk_share(items, 10_000, CFG)
    assert all(sum(i.tokens for i in chunk) <= budget for chunk in plan.chunks)


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
    assert summary_problems(GOOD + "\n- staging bucket rename", ["abc12345"], "") == [
        "these identifiers must appear exactly as written: abc12345"
    ]
    no_decisions = GOOD.replace("## Decisions\n", "")
    problems = summary_problems(no_decisions, [], "")
    assert problems == ["missing section headings: ## Decisions"]
    assert summary_problems(GOOD, [], ask)[0].startswith("the latest user request")
    assert summary_problems(GOOD + "\n- rename staging bucket by Friday", [], ask) == []


def test_the_request_check_works_for_scripts_without_spaces() -> None:
    assert reflects_ask("## Pending user asks\n- 把报告发给老板", "请把周报发给老板")
    assert not reflects_ask("## Pending user asks\n- none", "请把周报发给老板")
    assert reflects_ask("anything", "ok")  # nothing to check in a two-letter ask


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


def test_rules_section_prefers_red_lines_and_is_capped() -> None:
    agents = (
        "# Operating rules\n\nintro\n\n## Memory\n\nuse tools\n\n## Red Lines\n\n- never A\n"
        "- never B\n\n## Other\n\nmore"
    )
    assert rules_section(agents) == "- never A\n- never B"
    fallback = "# Title\n\n## House rules\n\n- be kind\n### Detail\n- sub\n## Next\n"
    assert rules_section(fallback) == "- be kind\n### Detail\n- sub"
    assert rules_section("# Operating rules\n\nno sections") == ""
    long = "## Red Lines\n" + ("- never do that\n" * 500)
    assert len(rules_section(long)) <= RULES_MAX_CHARS
