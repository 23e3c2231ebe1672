"""`/skills` through the real App: the chat's skills as its prompt lists them, and the broken
ones named to admins only; the console's editor lists the skills' files."""

from __future__ import annotations

from pathlib import Path

from bot.console.workspace_files import list_markdown
from tests.app_harness import Harness
from tests.fakes.anthropic import FakeAnthropic
from tests.test_skills_catalog import skill_text, write_skill

NOT_ALL_ADMINS = '[admin]\nusers = ["local:root"]\nlocal_is_admin = false\n'


async def test_skills_lists_this_chats_skills_and_admins_see_broken_ones(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    async with Harness(tmp_path, fake_anthropic.url, NOT_ALL_ADMINS) as h:
        write_skill(h.workspace, "digest", skill_text("digest", "Weekly digest."))
        write_skill(h.workspace, "slack-only", skill_text("slack-only", extra="channels: slack\n"))
        write_skill(h.workspace, "broken", "---\nname: broken\n---\n")
        await h.send("/skills", user="alice")
        await h.send("/skills", user="root")
    alice, root = h.channel.finals
    # The bundled workspace's weekly digest is there too; the Slack-only skill is not.
    assert alice.startswith("Skills in this chat (2):\n• digest - Weekly digest.\n")
    assert "• weekly-digest - " in alice and "slack-only" not in alice and "broken" not in alice
    assert root.startswith(alice + "\n⚠️ Left out (1); fixed, they load on the next turn:\n")
    assert root.endswith(
        "• skills/broken/SKILL.md, line 2: description: missing; say in one line when to "
        "use the skill"
    )
    assert fake_anthropic.message_requests == []  # a command never reaches the model


async def test_no_skills_says_so(tmp_path: Path, fake_anthropic: FakeAnthropic) -> None:
    async with Harness(tmp_path, fake_anthropic.url, '[tools]\ndeny = ["skill_read"]\n') as h:
        write_skill(h.workspace, "digest", skill_text("digest"))
        await h.send("/skills")
    assert h.channel.finals == ["No skills in this chat."]


def test_the_console_lists_the_skills_files(tmp_path: Path) -> None:
    write_skill(tmp_path, "digest", skill_text("digest"))
    (tmp_path / "skills" / "digest" / "template.md").write_text("t", encoding="utf-8")
    (tmp_path / "AGENTS.md").write_text("a", encoding="utf-8")
    assert [listed.name for listed in list_markdown(tmp_path)] == [
        "AGENTS.md",
        "skills/digest/SKILL.md",
        "skills/digest/template.md",
    ]
