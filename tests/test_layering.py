"""The import layering README's module map describes, checked over the source with `ast`:
which package may import which, no platform library in `bot/`, no module past the size
limit, and no import of a module (or name) that no longer exists.

Every import counts, also those inside functions or under TYPE_CHECKING: a lazy import is
still a dependency.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "channels")
MAX_LINES = 450
PLATFORM_LIBRARIES = ("telegram", "slack_sdk", "slack_bolt")
# The composition roots: they build the channels from channels/registry.py and hand them
# to the core (`krill run`, `krill doctor`, and `krill chat` with its terminal channel).
CHANNEL_ROOTS = ("bot/app.py", "bot/doctor.py", "bot/chat.py")
ABOVE_THE_STORE = (
    "bot.agent",
    "bot.context",
    "bot.memory",
    "bot.gateway",
    "bot.scheduler",
    "bot.app",
    "bot.cli",
    "channels",
)


@dataclass(frozen=True)
class Rule:
    """Modules under `where` (a path prefix) import none of `forbidden` (module prefixes)."""

    where: str
    forbidden: tuple[str, ...]
    why: str


RULES = (
    Rule("bot/", PLATFORM_LIBRARIES, "platform libraries belong to their channel package"),
    Rule("bot/context/", ("bot.agent",), "the context pipeline sits below the agent loop"),
    Rule("bot/tools/", ("bot.agent",), "tools sit below the agent loop"),
    Rule("bot/store/", ABOVE_THE_STORE, "the store sits below everything that uses it"),
    Rule("bot/sessions/", ("bot.agent", "bot.store", "bot.gateway"), "pure session policy"),
    Rule("bot/config/", ("bot.agent", "bot.store", "bot.gateway", "bot.tools"), "a leaf"),
    Rule(
        "channels/",
        ("bot.app", "bot.agent", "bot.gateway", "bot.store", "bot.scheduler", "bot.memory"),
        "adapters meet the core only at the Gateway contract (bot/channel_contract.py)",
    ),
)


@dataclass(frozen=True)
class Import:
    path: str  # the importing file, relative to the repository
    line: int
    module: str  # the module named by the statement
    names: tuple[str, ...]  # `from module import names`; () for `import module`


def source_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@cache
def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[Import]:
    found = []
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Import):
            found += [Import(relative(path), node.lineno, a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: resolve against the importing package
                base = package.rsplit(".", node.level - 1)[0]
                module = f"{base}.{module}" if module else base
            names = tuple(a.name for a in node.names)
            found.append(Import(relative(path), node.lineno, module, names))
    return found


def all_imports() -> list[Import]:
    return [imp for path in source_files() for imp in imports_of(path)]


def within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def targets(imp: Import) -> list[str]:
    """The modules an import may bring in: `from bot import agent` imports bot.agent."""
    return [imp.module, *(f"{imp.module}.{name}" for name in imp.names)]


def module_file(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def top_level_names(tree: ast.Module) -> set[str]:
    """Names a module defines at its top level, including under `if` and `try`."""
    names: set[str] = set()
    body: list[ast.stmt] = list(tree.body)
    while body:
        node = body.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.If | ast.Try):
            body.extend(node.body + node.orelse)
            if isinstance(node, ast.Try):
                body.extend(node.finalbody)
                for handler in node.handlers:
                    body.extend(handler.body)
    return names


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.where)
def test_layering(rule: Rule) -> None:
    broken = [
        f"{imp.path}:{imp.line} imports {imp.module}"
        for imp in all_imports()
        if imp.path.startswith(rule.where)
        and any(within(t, f) for t in targets(imp) for f in rule.forbidden)
    ]
    assert not broken, f"{rule.why}:\n" + "\n".join(broken)


def test_only_the_composition_roots_import_channels() -> None:
    broken = [
        f"{imp.path}:{imp.line} imports {imp.module}"
        for imp in all_imports()
        if imp.path.startswith("bot/")
        and imp.path not in CHANNEL_ROOTS
        and any(within(t, "channels") for t in targets(imp))
    ]
    assert not broken, "bot/ reaches channels only through the composition roots:\n" + "\n".join(
        broken
    )


def test_no_module_is_over_the_size_limit() -> None:
    long = [
        f"{relative(p)}: {n} lines"
        for p in source_files()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    ]
    assert not long, f"split modules over {MAX_LINES} lines:\n" + "\n".join(long)


def test_every_imported_module_and_name_exists() -> None:
    missing = []
    for imp in all_imports():
        if imp.module.split(".")[0] not in PACKAGES:
            continue
        path = module_file(imp.module)
        if path is None:
            missing.append(f"{imp.path}:{imp.line} imports {imp.module}, which does not exist")
            continue
        defined = top_level_names(parse(path))
        for name in imp.names:
            if name != "*" and name not in defined and module_file(f"{imp.module}.{name}") is None:
                missing.append(f"{imp.path}:{imp.line} imports {name} from {imp.module}")
    assert not missing, "\n".join(missing)


def test_the_checks_see_what_they_check() -> None:
    # Guards the guards: a wrong root or parser would pass every test above vacuously.
    imports = all_imports()
    assert any(imp.path == "bot/app.py" and within(imp.module, "channels") for imp in imports)
    assert any(
        imp.path.startswith("channels/telegram/") and imp.module == "telegram" for imp in imports
    )
    assert "SessionRow" in top_level_names(parse(ROOT / "bot/store/base.py"))
