"""Benchmark: what listing the skills costs a turn. Every turn lists `workspace/skills/`,
stats each SKILL.md and builds the prompt's list; a file is parsed again only when it
changed. Measured for 0, 10, 100 and 500 skills, unchanged (the usual turn) and right after
every file changed (each is parsed again).

Run: python bench/skills.py [--runs 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.agent.workspace import Workspace
from bot.skills.catalog import SkillCatalog
from bot.tools.policy import PolicyLayer, ToolPolicy
from bot.types import ChatType, SessionOrigin

ORIGIN = SessionOrigin("telegram", ChatType.DIRECT, "1", peer_id="1")
POLICY = ToolPolicy((PolicyLayer("tools"),))
BODY = "\n".join(
    f"{i}. A step of the procedure, described in a sentence or two." for i in range(40)
)


def write_skills(root: Path, count: int) -> None:
    for i in range(count):
        folder = root / "skills" / f"skill-{i:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: skill-{i:03d}\ndescription: Does task number {i} the way we agreed."
            f"\nchannels: [telegram, slack]\n---\n{BODY}\n",
            encoding="utf-8",
        )


def touch_all(root: Path, stamp: int) -> None:
    for path in (root / "skills").glob("*/SKILL.md"):
        os.utime(path, ns=(stamp, stamp))


def measure(count: int, runs: int) -> tuple[float, float, float]:
    """(p50 ms unchanged, p95 ms unchanged, p50 ms after every file changed)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "AGENTS.md").write_text("rules", encoding="utf-8")
        write_skills(root, count)
        workspace = Workspace(root, skills=SkillCatalog(root))
        workspace.system_blocks(is_direct=True, origin=ORIGIN, policy=POLICY)
        warm = []
        for _ in range(runs):
            started = time.perf_counter()
            workspace.system_blocks(is_direct=True, origin=ORIGIN, policy=POLICY)
            warm.append((time.perf_counter() - started) * 1000)
        cold = []
        for run in range(max(1, runs // 10)):
            touch_all(root, 10**9 * (run + 2))
            started = time.perf_counter()
            workspace.system_blocks(is_direct=True, origin=ORIGIN, policy=POLICY)
            cold.append((time.perf_counter() - started) * 1000)
    warm.sort()
    return statistics.median(warm), warm[int(len(warm) * 0.95) - 1], statistics.median(cold)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    print("skills | unchanged p50 ms | unchanged p95 ms | all changed p50 ms")
    print("-" * 66)
    for count in (0, 10, 100, 500):
        p50, p95, cold = measure(count, args.runs)
        print(f"{count:6d} | {p50:16.3f} | {p95:16.3f} | {cold:18.3f}")


if __name__ == "__main__":
    main()
