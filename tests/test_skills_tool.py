"""`skill_read`: a skill's instructions and files, confined to its folder, text only, and only
for the conversations the skill is meant for."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.skills.catalog import SkillCatalog
from bot.skills.tool import MAX_FILE_BYTES, SkillReadTool
from bot.tools.registry import ToolContext, ToolRegistry
from bot.types import ChatType, SessionOrigin
from tests.test_skills_catalog import skill_text, write_skill

TELEGRAM_DM = SessionOrigin("telegram", ChatType.DIRECT, "42", peer_id="42")


@pytest.fixture
def registry(tmp_path: Path) -> ToolRegistry:
    write_skill(tmp_path, "digest", skill_text("digest", body="1. Gather.\n2. Write."))
    (tmp_path / "skills" / "digest" / "template.md").write_text("**Week of**", encoding="utf-8")
    (tmp_path / "skills" / "digest" / "parts").mkdir()
    (tmp_path / "skills" / "digest" / "parts" / "footer.txt").write_text("bye", encoding="utf-8")
    (tmp_path / "skills" / "digest" / ".hidden").write_text("x", encoding="utf-8")
    write_skill(tmp_path, "slack-thing", skill_text("slack-thing", extra="channels: [slack]\n"))
    (tmp_path / "krill.toml").write_text("[anthropic]\napi_key = 'sk-secret'\n", encoding="utf-8")
    registry = ToolRegistry()
    SkillReadTool(SkillCatalog(tmp_path)).register(registry)
    return registry


async def read(registry: ToolRegistry, tmp_path: Path, **args: str) -> tuple[str, bool]:
    ctx = ToolContext("k", "s", "telegram:42", True, tmp_path, "turn", origin=TELEGRAM_DM)
    result = await registry.run(
        {"type": "tool_use", "id": "t1", "name": "skill_read", "input": args}, ctx
    )
    assert isinstance(result.content, str)
    return result.content, result.is_error


async def test_the_name_alone_gives_the_instructions_and_the_files_beside_them(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    text, error = await read(registry, tmp_path, name="digest")
    assert not error
    assert text.startswith("# Skill: digest\n\n1. Gather.\n2. Write.")
    assert "- parts/footer.txt\n- template.md" in text
    assert ".hidden" not in text and "SKILL.md" not in text.split("Files", 1)[1]
    same, _ = await read(registry, tmp_path, name="digest", path="SKILL.md")
    assert same == text


async def test_a_file_of_the_skill_is_read(registry: ToolRegistry, tmp_path: Path) -> None:
    assert await read(registry, tmp_path, name="digest", path="template.md") == (
        "**Week of**",
        False,
    )
    assert await read(registry, tmp_path, name="digest", path="parts/footer.txt") == ("bye", False)


@pytest.mark.parametrize(
    "path",
    ["../../krill.toml", "../slack-thing/SKILL.md", "/etc/passwd", "parts/../../../krill.toml"],
)
async def test_paths_out_of_the_skill_folder_are_refused(
    registry: ToolRegistry, tmp_path: Path, path: str
) -> None:
    text, error = await read(registry, tmp_path, name="digest", path=path)
    assert error
    assert "only files inside the skill's own folder" in text
    assert "sk-secret" not in text


async def test_a_link_leading_out_of_the_folder_is_refused(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    (tmp_path / "skills" / "digest" / "config.md").symlink_to(tmp_path / "krill.toml")
    text, error = await read(registry, tmp_path, name="digest", path="config.md")
    assert error and "sk-secret" not in text
    listing, _ = await read(registry, tmp_path, name="digest")
    assert "config.md" not in listing


async def test_binary_missing_and_huge_files_are_refused(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    folder = tmp_path / "skills" / "digest"
    (folder / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (folder / "big.md").write_bytes(b"a" * (MAX_FILE_BYTES + 1))
    text, error = await read(registry, tmp_path, name="digest", path="logo.png")
    assert error and "not a text file" in text
    text, error = await read(registry, tmp_path, name="digest", path="nope.md")
    assert error and "no such file" in text
    text, error = await read(registry, tmp_path, name="digest", path="parts")
    assert error and "no such file" in text
    text, error = await read(registry, tmp_path, name="digest", path="big.md")
    assert error and "reads at most" in text


async def test_skills_of_other_conversations_are_unknown(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    for name in ("slack-thing", "nope"):
        text, error = await read(registry, tmp_path, name=name)
        assert error and f"no skill named {name!r} here" in text
