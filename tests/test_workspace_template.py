"""The bundled workspace is a template, never a live folder: README's quick start (no
krill.toml) keeps its live workspace under the gitignored data folder and says where,
Krill refuses to run on the template itself, and what a bot writes (a person's memory
notes, stored tool results) never reaches a new workspace, the wheel, the image's build
context or git, even when a run of an older version left it in the template."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from bot.agent.workspace import bundled_workspace_dir, ensure_workspace
from tests.krill_process import KrillProcess, run_cli, write_config

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "workspace"
# What a run writes into a workspace: a person's notes, the operator's daily note, a result.
RUN_FILES = {
    "memory/people/telegram-333/2026-05-01.md": "Ann (telegram 333) is allergic to peanuts\n",
    "memory/2026-05-01.md": "operator note\n",
    "memory/shared/2026-05-01.md": "shared note\n",
    "tool-results/2026-05-01/0123456789ab.txt": "a large fetched page\n",
}


def template_memory_files() -> set[str]:
    return {
        p.relative_to(TEMPLATE).as_posix()
        for p in (TEMPLATE / "memory").rglob("*")
        if p.is_file() and p.name == ".gitkeep"
    }


def source_copy(tmp_path: Path) -> Path:
    """The repository's files as a build sees them, with a run's files in its workspace."""
    copy = tmp_path / "src"
    shutil.copytree(
        ROOT,
        copy,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "data", "test-artifacts", "__pycache__", "*.egg-info", ".*_cache"
        ),
    )
    for name, text in RUN_FILES.items():
        target = copy / "workspace" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return copy


async def test_the_quick_start_keeps_its_live_workspace_under_data(tmp_path: Path) -> None:
    async with KrillProcess(tmp_path, bare=True) as krill:
        live = tmp_path / "data" / "workspace"
        assert (live / "SOUL.md").is_file()
        assert f"workspace: created {live} from the bundled template" in krill.log()
    assert not (tmp_path / "workspace").exists()
    assert not (tmp_path / "krill.toml").exists()


async def test_krill_refuses_to_run_on_the_template(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"workspace": {"path": str(TEMPLATE)}})
    code, _, err = await run_cli(tmp_path, "run", "--config", str(config))
    assert code == 2, err
    assert "workspace.path" in err and "bundled workspace template" in err
    code, out, _ = await run_cli(tmp_path, "doctor", "--config", str(config))
    assert code == 1 and "is the bundled template" in out


def test_a_new_workspace_gets_only_the_template(tmp_path: Path) -> None:
    template = source_copy(tmp_path) / "workspace"
    live = tmp_path / "live"
    assert ensure_workspace(live, template)
    copied = {p.relative_to(live).as_posix() for p in live.rglob("*") if p.is_file()}
    tracked = subprocess.run(
        ["git", "ls-files", "workspace"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert copied == {name.removeprefix("workspace/") for name in tracked}
    assert not (live / "memory" / "people").exists()  # not even the person's folder name


@pytest.mark.timeout(300)
def test_the_wheel_carries_only_the_template(tmp_path: Path) -> None:
    source = source_copy(tmp_path)
    out = tmp_path / "wheel"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", out, source],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = out.glob("krill-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {n.removeprefix("bot/_workspace/") for n in names if n.startswith("bot/_workspace/")}
    assert "SOUL.md" in shipped and "skills/weekly-digest/SKILL.md" in shipped
    assert {n for n in shipped if n.startswith("memory/")} == template_memory_files()
    assert not any(n.startswith("tool-results/") for n in shipped)


def dockerignore_pattern(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as Docker matches it (Go's filepath.Match, plus `**` for any
    number of folders): `*` and `?` never cross a `/`."""
    regex = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            regex, i = regex + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            regex, i = regex + ".*", i + 2
        elif pattern[i] == "*":
            regex, i = regex + "[^/]*", i + 1
        elif pattern[i] == "?":
            regex, i = regex + "[^/]", i + 1
        else:
            regex, i = regex + re.escape(pattern[i]), i + 1
    return re.compile(regex + r"\Z")


def build_context(root: Path) -> set[str]:
    """The files `docker build` sends from `root`, by its .dockerignore: the last pattern
    matching a path or one of its folders decides, `!` letting it back in."""
    rules = []
    for line in (root / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keep = line.startswith("!")
        body = line.removeprefix("!").strip().strip("/")
        rules.append((keep, dockerignore_pattern(body)))
    sent = set()
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        name = path.relative_to(root).as_posix()
        parts = name.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        excluded = False
        for keep, rule in rules:
            if any(rule.match(p) for p in prefixes):
                excluded = not keep
        if not excluded:
            sent.add(name)
    return sent


def test_dockerignore_matching_follows_docker() -> None:
    assert dockerignore_pattern("workspace/memory/*").match("workspace/memory/a.md")
    assert not dockerignore_pattern("workspace/memory/*.md").match("workspace/memory/p/a.md")
    assert dockerignore_pattern("**/__pycache__").match("bot/x/__pycache__")
    assert dockerignore_pattern("*").match("bot") and not dockerignore_pattern("*").match("a/b")


def test_the_image_context_carries_only_the_template(tmp_path: Path) -> None:
    sent = build_context(source_copy(tmp_path))
    assert "workspace/SOUL.md" in sent and "bot/app.py" in sent and "pyproject.toml" in sent
    memory = {n.removeprefix("workspace/") for n in sent if n.startswith("workspace/memory/")}
    assert memory == template_memory_files()
    assert not any(n.startswith("workspace/tool-results/") for n in sent)
    assert not any(n.startswith(("data/", ".git")) for n in sent)


def test_git_ignores_what_a_run_writes_into_the_template() -> None:
    git = shutil.which("git")
    assert git, "git is needed to check .gitignore"
    names = [f"workspace/{name}" for name in RUN_FILES]
    done = subprocess.run(
        [git, "check-ignore", "--no-index", *names, "workspace/memory/.gitkeep"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert set(done.stdout.split()) == set(names)


def test_the_bundled_template_is_the_repository_folder() -> None:
    assert bundled_workspace_dir().resolve() == TEMPLATE.resolve()
