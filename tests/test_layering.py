"""The import layering the module map in docs/architecture.md describes, checked over the
source with `ast`: what each package (or top-level module of bot/) may import, no platform
library in bot/, channels reached only from the composition roots, no module past the size
limit, and no import of a module (or name) that no longer exists.

Every import counts, also those inside functions or under TYPE_CHECKING: a lazy import is
still a dependency.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "channels")
MAX_LINES = 450
PLATFORM_LIBRARIES = ("telegram", "slack_sdk", "slack_bolt")
# The composition roots: they hand the registry in channels/registry.py to the core (the
# `krill` entry point: the config's channel sections and `krill status`; `krill run`,
# `krill doctor`, and `krill chat` with its terminal channel).
CHANNEL_ROOTS = ("bot/cli/__init__.py", "bot/app.py", "bot/doctor.py", "bot/chat.py")
# Above everything, so free to import anything: the composition roots and the command line.
TOP = frozenset(
    {"bot.app", "bot.app_buttons", "bot.app_scheduler", "bot.doctor", "bot.chat", "bot.cli"}
)
# What a channel package sees of the core: the adapter contract and the small shared pieces.
CHANNEL_SIDE = (
    *("bot.backoff", "bot.channel_contract", "bot.checks", "bot.commands", "bot.config"),
    *("bot.errors", "bot.http_guard", "bot.log_context", "bot.types", "channels.chunking"),
    *("bot.forwarded", "channels.pacing", "channels.sources", "channels.timeouts"),
)
# What each unit (a package, or a top-level module of bot/) may import besides itself and
# the `bot` package's version; the module map (docs/architecture.md) says the same, one line a unit.
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "bot": (),  # the package: its version
    "bot.types": (),
    "bot.errors": (),
    "bot.checks": (),
    "bot.backoff": (),
    "bot.untrusted": (),
    "bot.metrics": (),
    "bot.http_guard": (),
    "bot.forwarded": (),
    "bot.wrong_tokens": ("bot.store",),
    "bot.log_context": (),
    "bot.log_tail": (),
    "bot.lifespan": (),
    "bot.logs": ("bot.config", "bot.errors", "bot.log_context", "bot.log_tail"),
    "bot.transcript": ("bot.types",),
    "bot.inbound": ("bot.types",),
    "bot.transcript_export": ("bot.transcript",),
    "bot.config": ("bot.errors",),
    "bot.channel_contract": ("bot.checks", "bot.config", "bot.types"),
    "bot.server": ("bot.http_guard", "bot.metrics"),
    "bot.commands": (
        *("bot.buttons", "bot.config", "bot.sessions", "bot.skills", "bot.store", "bot.tools"),
        "bot.types",
    ),
    "bot.buttons": (
        *("bot.channel_contract", "bot.config", "bot.outbox", "bot.store", "bot.tools"),
        *("bot.types", "bot.untrusted"),
    ),
    "bot.sessions": ("bot.config", "bot.types"),
    "bot.spending": ("bot.config", "bot.sessions", "bot.store", "bot.types"),
    # The factory (bot/store/factory.py) reads storage.url to pick an adapter; the adapters
    # wait out a locked file or a dropped connection (backoff); a migration's backfill
    # parses session keys (bot.sessions).
    "bot.store": (
        *("bot.backoff", "bot.config", "bot.errors", "bot.sessions", "bot.transcript"),
        "bot.types",
    ),
    "bot.tools": (
        *("bot.backoff", "bot.checks", "bot.config", "bot.logs", "bot.sessions"),
        *("bot.channel_contract", "bot.types", "bot.untrusted"),
    ),
    "bot.context": (
        *("bot.context.compaction", "bot.config", "bot.errors", "bot.sessions", "bot.store"),
        *("bot.tools", "bot.transcript", "bot.types", "bot.untrusted"),
    ),
    "bot.context.compaction": (
        *("bot.context", "bot.config", "bot.errors", "bot.sessions", "bot.store"),
        *("bot.transcript", "bot.types", "bot.untrusted"),
    ),
    # bot/media/usage.py sizes the kept tool results' folder too.
    "bot.media": ("bot.config", "bot.tools", "bot.transcript", "bot.types", "bot.untrusted"),
    "bot.agent": (
        *("bot.channel_contract", "bot.config", "bot.context", "bot.errors", "bot.metrics"),
        *("bot.log_context", "bot.media", "bot.outbox", "bot.providers", "bot.sessions"),
        *("bot.skills", "bot.spending", "bot.store", "bot.tools", "bot.transcript", "bot.types"),
    ),
    "bot.skills": ("bot.tools", "bot.types"),
    "bot.providers": (
        *("bot.backoff", "bot.checks", "bot.config", "bot.errors", "bot.types"),
        "bot.untrusted",
    ),
    "bot.outbox": (
        *("bot.backoff", "bot.channel_contract", "bot.metrics", "bot.store", "bot.types"),
    ),
    "bot.memory": (
        *("bot.agent", "bot.config", "bot.context", "bot.context.compaction", "bot.errors"),
        *("bot.sessions", "bot.untrusted"),
        # `krill memory` (bot/memory/cli.py) opens the store itself.
        *("bot.startup", "bot.store", "bot.tools", "bot.transcript"),
        "bot.types",
    ),
    "bot.gateway": (
        *("bot.agent", "bot.buttons", "bot.channel_contract", "bot.commands", "bot.config"),
        *("bot.inbound", "bot.media", "bot.metrics", "bot.outbox", "bot.sessions"),
        *("bot.skills", "bot.spending", "bot.store", "bot.tools", "bot.transcript"),
        *("bot.types", "bot.untrusted", "bot.wrong_tokens"),
    ),
    "bot.startup": ("bot.agent", "bot.config", "bot.errors", "bot.store"),
    "bot.pairings": ("bot.sessions", "bot.store"),
    "bot.console": (
        *("bot.agent", "bot.config", "bot.forwarded", "bot.log_tail", "bot.media"),
        *(
            "bot.memory",
            "bot.metrics",
            "bot.pairings",
            "bot.recurrence",
            "bot.sessions",
            "bot.skills",
            "bot.spending",
        ),
        *("bot.store", "bot.transcript", "bot.transcript_export", "bot.types", "bot.wrong_tokens"),
    ),
    "bot.scheduler": (
        *("bot.agent", "bot.buttons", "bot.config", "bot.context", "bot.gateway", "bot.memory"),
        *("bot.recurrence", "bot.sessions", "bot.store", "bot.tools", "bot.transcript"),
        *("bot.types", "bot.untrusted"),
    ),
    "bot.recurrence": (),
    "channels": (),
    "channels.chunking": (),
    "channels.pacing": ("bot.errors",),
    "channels.sources": ("bot.types",),
    "channels.timeouts": ("bot.config",),
    "channels.local": CHANNEL_SIDE,
    "channels.slack": CHANNEL_SIDE,
    "channels.telegram": CHANNEL_SIDE,
    "channels.registry": (
        *("bot.channel_contract", "channels", "channels.local", "channels.slack"),
        "channels.telegram",
    ),
}


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


def unit_of(module: str) -> str:
    """A module's line in the module map: its package (compaction counts as its own), or
    itself for a top-level module of bot/."""
    for sub in ("bot.context.compaction",):
        if within(module, sub):
            return sub
    return ".".join(module.split(".")[:2])


def imported_modules(imp: Import) -> list[str]:
    """The modules an import brings in: `from bot import agent` imports bot.agent."""
    if not imp.names:
        return [imp.module]
    found = [f"{imp.module}.{n}" for n in imp.names if module_file(f"{imp.module}.{n}")]
    return found if len(found) == len(imp.names) else [imp.module, *found]


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


def test_every_unit_imports_only_what_the_module_map_allows() -> None:
    broken = []
    for imp in all_imports():
        unit = unit_of(module_name(ROOT / imp.path))
        if unit in TOP:
            continue
        assert unit in MAY_IMPORT, (
            f"{imp.path}: add {unit} to MAY_IMPORT and the module map in docs/architecture.md"
        )
        for module in imported_modules(imp):
            target = unit_of(module)
            if module.split(".")[0] not in PACKAGES or target in (unit, "bot"):
                continue
            if target not in MAY_IMPORT[unit]:
                broken.append(f"{imp.path}:{imp.line} imports {module}")
    assert not broken, (
        "imports the module map (docs/architecture.md) does not allow:\n" + "\n".join(broken)
    )


def bot_imports_where(matches: Callable[[Import], bool]) -> str:
    """The imports under bot/ that `matches`, one line each ("" when none)."""
    return "\n".join(
        f"{imp.path}:{imp.line} imports {imp.module}"
        for imp in all_imports()
        if imp.path.startswith("bot/") and matches(imp)
    )


def test_bot_imports_no_platform_library() -> None:
    broken = bot_imports_where(
        lambda imp: any(within(imp.module, lib) for lib in PLATFORM_LIBRARIES)
    )
    assert not broken, f"platform libraries belong to their channel package:\n{broken}"


def test_only_the_composition_roots_import_channels() -> None:
    broken = bot_imports_where(
        lambda imp: (
            imp.path not in CHANNEL_ROOTS
            and any(within(m, "channels") for m in imported_modules(imp))
        )
    )
    assert not broken, f"bot/ reaches channels only through the composition roots:\n{broken}"


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
