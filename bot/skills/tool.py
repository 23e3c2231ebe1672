"""Tool `skill_read(name, path?)`: a skill's instructions, or a text file from its folder.

Only the skills the conversation has can be read, and only files inside that skill's own
folder (links leading out of it included); binary files are refused. What it returns is the
operator's own text, so it is not wrapped as untrusted; the registry's result hook keeps a
long file on disk like any other large result.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bot.skills.catalog import READ_TOOL, SKILL_FILE, Skill, SkillCatalog
from bot.tools.registry import Tool, ToolContext, ToolError, ToolRegistry

NAME = READ_TOOL
MAX_FILE_BYTES = 1_000_000
MAX_LISTED_FILES = 50
DESCRIPTION = (
    "Read a skill listed in your instructions: with only its name, its instructions and the "
    "files in its folder; with a path, one of those files."
)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "The skill's name, as listed."},
        "path": {
            "type": "string",
            "description": "A file in the skill's folder, relative to it; leave out for SKILL.md.",
        },
    },
    "required": ["name"],
}


def inside(folder: Path, raw: str) -> Path:
    """The file `raw` names inside `folder`, links resolved; ToolError when it is elsewhere,
    missing or not a file."""
    root = folder.resolve()
    target = (root / raw).resolve()
    if not target.is_relative_to(root):
        raise ToolError(f"{raw}: only files inside the skill's own folder can be read")
    if not target.is_file():
        raise ToolError(f"{raw}: no such file in the skill's folder")
    return target


def folder_files(folder: Path) -> list[str]:
    """The files beside SKILL.md (relative, sorted, hidden ones and links out left out)."""
    root = folder.resolve()
    found = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if (
            any(part.startswith(".") for part in relative.parts)
            or relative.as_posix() == SKILL_FILE
        ):
            continue
        if path.is_file() and path.resolve().is_relative_to(root):
            found.append(relative.as_posix())
    return found


def read_text(path: Path, shown: str) -> str:
    """The file as text; ToolError for one too large or not text."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ToolError(f"{shown} has {size:,} bytes; skill_read reads at most {MAX_FILE_BYTES:,}")
    data = path.read_bytes()
    try:
        if b"\x00" in data:
            raise UnicodeDecodeError("utf-8", data, 0, 1, "NUL byte")
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{shown} is not a text file; skill_read reads text only") from None


def instructions(skill: Skill) -> str:
    """What `skill_read(name)` returns: the instructions, then the other files to read."""
    text = f"# Skill: {skill.name}\n\n{skill.body or '(no instructions)'}"
    files = folder_files(skill.folder)
    if not files:
        return text
    listed = [f"- {f}" for f in files[:MAX_LISTED_FILES]]
    if len(files) > MAX_LISTED_FILES:
        listed.append(f"- ... and {len(files) - MAX_LISTED_FILES} more")
    call = f'skill_read(name="{skill.name}", path=...)'
    return f"{text}\n\nFiles in this skill's folder ({call}):\n" + "\n".join(listed)


class SkillReadTool:
    def __init__(self, catalog: SkillCatalog):
        self.catalog = catalog

    def register(self, registry: ToolRegistry) -> None:
        registry.register(Tool(NAME, DESCRIPTION, SCHEMA, self.run, timeout=30.0))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        name = str(args.get("name") or "").strip()
        skill = self.catalog.get(name)
        # A skill limited to other conversations is as unknown here as a missing one.
        if skill is None or not skill.fits(ctx.origin):
            raise ToolError(
                f"no skill named {name!r} here; the skills you have are listed in your instructions"
            )
        path = str(args.get("path") or "").strip()
        if not path or path == SKILL_FILE:
            return await asyncio.to_thread(instructions, skill)
        target = inside(skill.folder, path)
        return await asyncio.to_thread(read_text, target, path)
