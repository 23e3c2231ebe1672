"""Skills in the workspace: front matter parsing and its problems (file and line), the
per-conversation filter, reloading on edit, and the list in the system prompt."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from bot.agent.workspace import Workspace
from bot.skills.catalog import SkillCatalog, prompt_section
from bot.tools.policy import PolicyLayer, ToolPolicy
from bot.types import ChatType, SessionOrigin

SLACK_CHANNEL = SessionOrigin("slack", ChatType.CHANNEL, "C1")
TELEGRAM_DM = SessionOrigin("telegram", ChatType.DIRECT, "42", peer_id="42")
EVERYTHING = ToolPolicy((PolicyLayer("tools"),))


def write_skill(root: Path, folder: str, text: str) -> Path:
    path = root / "skills" / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def skill_text(
    name: str, description: str = "Does a thing.", extra: str = "", body: str = ""
) -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body or 'Steps.'}\n"


def test_a_skill_is_parsed_with_its_limits(tmp_path: Path) -> None:
    write_skill(
        tmp_path,
        "release-notes",
        skill_text(
            "release-notes",
            "Write release notes  from merged PRs.",
            "channels: [Slack]\nchat_types: channel\ntools: [web_fetch]\n",
            "1. Collect the PRs.\n2. Group them.",
        ),
    )
    scan = SkillCatalog(tmp_path).scan()
    assert scan.problems == ()
    (skill,) = scan.skills
    assert skill.name == "release-notes"
    assert skill.description == "Write release notes from merged PRs."
    assert skill.channels == ("slack",)
    assert skill.chat_types == (ChatType.CHANNEL,)
    assert skill.tools == ("web_fetch",)
    assert skill.body == "1. Collect the PRs.\n2. Group them."


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("name: x\n", 1, "no front matter"),
        ("---\nname: broken\ndescription: never closed\n", 1, "never closed"),
        ("---\nname: broken\ndescription: [unclosed\n---\n", 3, "not valid YAML"),
        ("---\nname: broken\n  description: bad indent\n---\n", 3, "not valid YAML"),
        ("---\nname: broken\n---\n", 2, "description: missing"),
        ("---\ndescription: d\nname: other\n---\n", 3, "differs from the folder's name"),
        ("---\nname: Broken_Name\ndescription: d\n---\n", 2, "lower-case"),
        ("---\nname: broken\ndescription: d\nchat_types: [dm]\n---\n", 4, "'dm' is not one of"),
        ("---\nname: broken\ndescription: d\n\ntools: {a: 1}\n---\n", 5, "tools: expected"),
        ("---\n- just\n- a list\n---\n", 2, "key: value"),
    ],
)
def test_a_broken_skill_is_left_out_naming_file_and_line(
    tmp_path: Path, text: str, line: int, says: str
) -> None:
    write_skill(tmp_path, "broken", text)
    write_skill(tmp_path, "fine", skill_text("fine"))
    scan = SkillCatalog(tmp_path).scan()
    assert [s.name for s in scan.skills] == ["fine"]
    (problem,) = scan.problems
    assert problem.path == "skills/broken/SKILL.md"
    assert problem.line == line, str(problem)
    assert says in problem.message
    assert str(problem).startswith(f"skills/broken/SKILL.md, line {line}: ")


def test_a_folder_without_skill_md_is_reported(tmp_path: Path) -> None:
    (tmp_path / "skills" / "draft").mkdir(parents=True)
    (tmp_path / "skills" / "draft" / "skill.md").write_text("---\n", encoding="utf-8")
    (problem,) = SkillCatalog(tmp_path).scan().problems
    assert str(problem) == "skills/draft/SKILL.md: no SKILL.md in this folder, so no skill"


def test_no_skills_folder_means_no_skills(tmp_path: Path) -> None:
    scan = SkillCatalog(tmp_path).scan()
    assert scan.skills == () and scan.problems == ()


def test_edits_show_on_the_next_scan_and_a_problem_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_skill(tmp_path, "digest", "---\nname: digest\n---\n")
    catalog = SkillCatalog(tmp_path)
    with caplog.at_level(logging.WARNING, logger="bot.skills.catalog"):
        for _ in range(3):
            assert catalog.scan().skills == ()
    assert [r.getMessage() for r in caplog.records] == [
        "skill left out: skills/digest/SKILL.md, line 2: description: missing; say in one "
        "line when to use the skill"
    ]
    path.write_text(skill_text("digest", "Weekly digest."), encoding="utf-8")
    os.utime(path, ns=(1, 1))  # a different mtime even on coarse clocks
    assert [s.description for s in catalog.scan().skills] == ["Weekly digest."]
    path.unlink()
    path.parent.rmdir()
    assert catalog.scan().skills == ()


def test_conversations_get_the_skills_meant_for_them(tmp_path: Path) -> None:
    write_skill(tmp_path, "anywhere", skill_text("anywhere"))
    write_skill(tmp_path, "slack-only", skill_text("slack-only", extra="channels: slack\n"))
    write_skill(tmp_path, "dms", skill_text("dms", extra="chat_types: [direct]\n"))
    write_skill(tmp_path, "needs-mcp", skill_text("needs-mcp", extra="tools: [github__search]\n"))
    catalog = SkillCatalog(tmp_path)
    everything = EVERYTHING.allows
    assert [s.name for s in catalog.available(SLACK_CHANNEL, everything)] == [
        "anywhere",
        "needs-mcp",
        "slack-only",
    ]
    assert [s.name for s in catalog.available(TELEGRAM_DM, everything)] == [
        "anywhere",
        "dms",
        "needs-mcp",
    ]
    no_mcp = ToolPolicy((PolicyLayer("tools", deny=("*__*",)),))
    assert "needs-mcp" not in [s.name for s in catalog.available(TELEGRAM_DM, no_mcp.allows)]
    # Without skill_read a conversation could not read a skill, so it has none.
    no_read = ToolPolicy((PolicyLayer("tools", deny=("skill_read",)),))
    assert catalog.available(TELEGRAM_DM, no_read.allows) == ()
    # A session whose origin is unknown gets only the skills limited to nothing.
    assert [s.name for s in catalog.available(None, everything)] == ["anywhere", "needs-mcp"]


def test_the_prompt_lists_names_and_descriptions_after_the_files_byte_stable(
    tmp_path: Path,
) -> None:
    (tmp_path / "AGENTS.md").write_text("rules", encoding="utf-8")
    write_skill(tmp_path, "zeta", skill_text("zeta", "Last one.", body="SECRET STEPS Z"))
    write_skill(tmp_path, "alpha", skill_text("alpha", "First one.", body="SECRET STEPS A"))
    workspace = Workspace(tmp_path, skills=SkillCatalog(tmp_path))
    first = workspace.system_blocks(is_direct=True, origin=TELEGRAM_DM, policy=EVERYTHING)
    text = first[0]["text"]
    assert text.index("## AGENTS.md") < text.index("# Skills")
    assert text.endswith("\n- alpha: First one.\n- zeta: Last one.")
    assert "SECRET STEPS" not in text  # the instructions are read on demand only
    again = workspace.system_blocks(is_direct=True, origin=TELEGRAM_DM, policy=EVERYTHING)
    assert again == first
    # Without a policy (e.g. compaction's size estimate) or skills, the prompt is the files'.
    assert workspace.system_blocks(is_direct=True)[0]["text"] == workspace.system_prompt(
        include_memory=True
    )


def test_the_list_is_capped() -> None:
    from bot.skills.catalog import MAX_LISTED, Skill

    skills = [Skill(f"s{i:03d}", "d", Path("."), "") for i in range(MAX_LISTED + 2)]
    section = prompt_section(skills)
    assert f"- s{MAX_LISTED - 1:03d}: d" in section and f"- s{MAX_LISTED:03d}" not in section
    assert section.endswith("- (2 more skills are not listed)")


def test_the_documented_example_is_a_valid_skill(tmp_path: Path) -> None:
    tools_doc = Path(__file__).parent.parent / "docs" / "tools.md"
    chapter = tools_doc.read_text(encoding="utf-8").split("\n## Skills\n", 1)[1]
    example = chapter.split("```markdown\n", 1)[1].split("\n```\n", 1)[0]
    write_skill(tmp_path, "release-notes", example + "\n")
    scan = SkillCatalog(tmp_path).scan()
    assert scan.problems == ()
    (skill,) = scan.skills
    assert (skill.channels, skill.chat_types, skill.tools) == (
        ("slack",),
        (ChatType.CHANNEL, ChatType.DIRECT),
        ("web_fetch",),
    )


def test_the_bundled_skills_load() -> None:
    from bot.agent.workspace import bundled_workspace_dir

    scan = SkillCatalog(bundled_workspace_dir()).scan()
    assert scan.problems == ()
    assert [s.name for s in scan.skills] == ["summarize-thread", "weekly-digest"]
