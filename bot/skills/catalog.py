"""The skills in the workspace: `skills/<name>/SKILL.md` files (YAML front matter, then the
instructions), parsed, checked, and listed for the conversations they apply to.

The folder is looked at on every turn, and each SKILL.md is re-read only when its
modification time or size changed, so an edit on the host or in the console shows on the
next turn. A SKILL.md that cannot be used (no front matter, broken YAML, a missing or
malformed field) is left out and reported once per version, in the log and by `krill
doctor`, naming the file and the line.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bot.types import ChatType, SessionOrigin

log = logging.getLogger(__name__)

SKILLS_DIR = "skills"
SKILL_FILE = "SKILL.md"
READ_TOOL = "skill_read"  # without it a conversation has no skills: it could not read them
FENCE = "---"
# The front matter starts on the file's second line (the first is the opening fence).
FIRST_YAML_LINE = 2
NAME_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
NAME_MAX = 64
DESCRIPTION_MAX = 1024
# Skills listed in one prompt; past this many the list says how many were left out.
MAX_LISTED = 100
CHAT_TYPES = ", ".join(str(t) for t in ChatType)
# libyaml's parser when PyYAML was built with it (several times faster), else the pure one.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    folder: Path
    body: str  # the instructions: SKILL.md after its front matter
    channels: tuple[str, ...] = ()  # empty: every channel
    chat_types: tuple[ChatType, ...] = ()  # empty: every kind of chat
    tools: tuple[str, ...] = ()  # tools it needs; left out where one is not usable

    def fits(self, origin: SessionOrigin | None) -> bool:
        """Whether the skill applies to the conversation `origin` (a session of unknown
        origin gets only the skills limited to nothing)."""
        if origin is None:
            return not (self.channels or self.chat_types)
        if self.channels and origin.channel not in self.channels:
            return False
        return not self.chat_types or origin.chat_type in self.chat_types


@dataclass(frozen=True, slots=True)
class SkillProblem:
    """Why one SKILL.md is left out."""

    path: str  # relative to the workspace
    line: int  # 0: the problem has no line (e.g. the file is missing)
    message: str

    def __str__(self) -> str:
        where = f"{self.path}, line {self.line}" if self.line else self.path
        return f"{where}: {self.message}"


@dataclass(frozen=True, slots=True)
class SkillScan:
    skills: tuple[Skill, ...]  # sorted by name
    problems: tuple[SkillProblem, ...]


class _Invalid(ValueError):
    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line = line


def split_front_matter(text: str) -> tuple[str, str]:
    """(the YAML between the opening and closing `---` lines, the rest); _Invalid when the
    file does not start with front matter."""
    lines = text.removeprefix("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != FENCE:
        raise _Invalid(1, f"no front matter: the file must start with a '{FENCE}' line")
    for index, line in enumerate(lines[1:], start=1):
        if line.strip() == FENCE:
            return "".join(lines[1:index]), "".join(lines[index + 1 :])
    raise _Invalid(1, f"the front matter is never closed by a '{FENCE}' line")


def _key_lines(front: str) -> dict[str, int]:
    """The file line each top-level key of the front matter is on."""
    node = yaml.compose(front, Loader=_LOADER)
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {
        str(key.value): key.start_mark.line + FIRST_YAML_LINE
        for key, _ in node.value
        if isinstance(key, yaml.ScalarNode)
    }


def _strings(value: Any, key: str, line: int) -> tuple[str, ...]:
    """A list of strings (a single string counts as a list of one)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) and i.strip() for i in items):
        raise _Invalid(line, f"{key}: expected a name or a list of names, e.g. [a, b]")
    return tuple(i.strip() for i in items)


def parse_skill(text: str, folder: Path) -> Skill:
    """The skill a SKILL.md in `folder` describes; _Invalid with the line otherwise."""
    front, body = split_front_matter(text)
    try:
        lines = _key_lines(front)
        data = yaml.load(front, Loader=_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        context = getattr(exc, "context_mark", None)
        # Something left open is found only at the end; where it was opened says more.
        if context is not None and (mark is None or mark.line >= front.count("\n")):
            mark = context
        line = mark.line + FIRST_YAML_LINE if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise _Invalid(line, f"the front matter is not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise _Invalid(FIRST_YAML_LINE, "the front matter must be key: value lines")

    def line_of(key: str) -> int:
        return lines.get(key, FIRST_YAML_LINE)

    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _Invalid(line_of("name"), "name: missing; give the skill's folder name")
    name = name.strip()
    if len(name) > NAME_MAX or not NAME_RE.fullmatch(name):
        raise _Invalid(
            line_of("name"),
            f"name: {name!r} must be lower-case letters, digits and single hyphens "
            f"(at most {NAME_MAX} characters)",
        )
    if name != folder.name:
        raise _Invalid(
            line_of("name"), f"name: {name!r} differs from the folder's name {folder.name!r}"
        )
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        raise _Invalid(
            line_of("description"), "description: missing; say in one line when to use the skill"
        )
    description = " ".join(description.split())
    if len(description) > DESCRIPTION_MAX:
        raise _Invalid(
            line_of("description"),
            f"description: {len(description)} characters, at most {DESCRIPTION_MAX}",
        )
    channels: tuple[str, ...] = ()
    if data.get("channels") is not None:
        channels = tuple(
            c.lower() for c in _strings(data["channels"], "channels", line_of("channels"))
        )
    chat_types: tuple[ChatType, ...] = ()
    if data.get("chat_types") is not None:
        raw = _strings(data["chat_types"], "chat_types", line_of("chat_types"))
        unknown = [t for t in raw if t.lower() not in set(ChatType)]
        if unknown:
            raise _Invalid(
                line_of("chat_types"), f"chat_types: {unknown[0]!r} is not one of {CHAT_TYPES}"
            )
        chat_types = tuple(ChatType(t.lower()) for t in raw)
    tools: tuple[str, ...] = ()
    if data.get("tools") is not None:
        tools = _strings(data["tools"], "tools", line_of("tools"))
    return Skill(name, description, folder, body.strip(), channels, chat_types, tools)


class SkillCatalog:
    """The skills under `<workspace>/skills`, kept by each SKILL.md's (mtime, size)."""

    def __init__(self, workspace: Path):
        self.workspace = workspace
        self.root = workspace / SKILLS_DIR
        self._cache: dict[str, tuple[tuple[int, int], Skill | SkillProblem]] = {}

    def scan(self) -> SkillScan:
        """Every skill folder as it is on disk now (one directory listing and one stat a
        skill; a file is read again only when it changed)."""
        try:
            folders = sorted(
                e.name for e in os.scandir(self.root) if e.is_dir() and not e.name.startswith(".")
            )
        except (FileNotFoundError, NotADirectoryError):
            folders = []
        skills: list[Skill] = []
        problems: list[SkillProblem] = []
        for folder in folders:
            found = self._load(folder)
            if isinstance(found, Skill):
                skills.append(found)
            elif found is not None:
                problems.append(found)
        for gone in self._cache.keys() - set(folders):
            del self._cache[gone]
        return SkillScan(tuple(skills), tuple(problems))

    def available(
        self, origin: SessionOrigin | None, allows: Callable[[str], bool]
    ) -> tuple[Skill, ...]:
        """The skills a conversation has: those that fit it, whose tools it may use."""
        if not allows(READ_TOOL):
            return ()
        return tuple(s for s in self.scan().skills if s.fits(origin) and all(map(allows, s.tools)))

    def get(self, name: str) -> Skill | None:
        return next((s for s in self.scan().skills if s.name == name), None)

    def _load(self, folder: str) -> Skill | SkillProblem | None:
        path = self.root / folder / SKILL_FILE
        relative = f"{SKILLS_DIR}/{folder}/{SKILL_FILE}"
        try:
            st = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            self._cache.pop(folder, None)
            return SkillProblem(relative, 0, f"no {SKILL_FILE} in this folder, so no skill")
        key = (st.st_mtime_ns, st.st_size)
        cached = self._cache.get(folder)
        if cached is not None and cached[0] == key:
            return cached[1]
        found: Skill | SkillProblem
        try:
            found = parse_skill(path.read_text(encoding="utf-8"), self.root / folder)
        except _Invalid as exc:
            found = SkillProblem(relative, exc.line, str(exc))
        except (OSError, UnicodeDecodeError) as exc:
            found = SkillProblem(relative, 0, f"cannot be read: {exc}")
        if isinstance(found, SkillProblem):
            log.warning("skill left out: %s", found)
        self._cache[folder] = (key, found)
        return found


def prompt_section(skills: Sequence[Skill]) -> str:
    """The system prompt's list of `skills` (name and description, in the given order)."""
    lines = [
        "# Skills",
        "",
        "Your operator wrote these procedures for particular tasks. When a request matches "
        "one, call skill_read with its name before you start, and follow it; it may name "
        "more files in its folder, which skill_read also reads (its path argument).",
        "",
    ]
    lines += [f"- {s.name}: {s.description}" for s in skills[:MAX_LISTED]]
    if len(skills) > MAX_LISTED:
        lines.append(f"- ({len(skills) - MAX_LISTED} more skills are not listed)")
    return "\n".join(lines)
