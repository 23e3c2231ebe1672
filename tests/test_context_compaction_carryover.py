"""What a summary carries besides the model's text: the workspace rules."""

from __future__ import annotations

from bot.context.compaction.carryover import RULES_MAX_CHARS, rules_section


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


def test_session_startup_is_carried_with_the_red_lines_each_capped() -> None:
    agents = (
        "# Operating rules\n\n## Session Startup\n\nRead SOUL.md and USER.md first.\n\n"
        "## Memory\n\nuse tools\n\n## Red Lines\n\n- never A\n"
    )
    assert rules_section(agents) == (
        "### Session Startup\nRead SOUL.md and USER.md first.\n\n### Red Lines\n- never A"
    )
    # Alone, the startup section is carried as the red lines are.
    assert rules_section("## Session Startup\n\nRead SOUL.md.\n") == "Read SOUL.md."
    long = "## Session Startup\n" + "- read this\n" * 400 + "## Red Lines\n" + "- no\n" * 900
    carried = rules_section(long)
    startup, red_lines = carried.split("### Red Lines\n")
    assert len(startup) <= RULES_MAX_CHARS + 40 and len(red_lines) <= RULES_MAX_CHARS
