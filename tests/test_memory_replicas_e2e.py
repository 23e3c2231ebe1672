"""End to end with two real `krill run` replicas sharing one store and one workspace: a note
the model writes through one replica is recalled by the other and found by `krill memory
search` run beside them (docs/contracts.md section 10: every replica searches the same index)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.context.messages import RECALL_HEADER
from tests.fakes.anthropic import FakeAnthropic
from tests.krill_process import KrillProcess, run_cli, write_config

NOTE = "Alice's locker code is 7319"


def shared(tmp_path: Path) -> dict[str, Any]:
    """What both replicas share: the store and the workspace folder."""
    return {
        "storage": {"url": f"sqlite:///{tmp_path / 'shared' / 'krill.db'}"},
        "workspace": {"path": str(tmp_path / "workspace")},
    }


async def test_a_note_written_through_one_replica_is_found_by_another(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake = fake_anthropic
    env = {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake.url}
    config = shared(tmp_path)
    fake.queue_tool_use("memory_append", {"text": NOTE})
    fake.queue_text("Noted.")
    fake.queue_text("It is 7319.")
    for folder in ("a", "b", "workspace/memory"):
        (tmp_path / folder).mkdir(parents=True)
    async with (
        KrillProcess(tmp_path / "a", config, env) as one,
        KrillProcess(tmp_path / "b", config, env) as other,
    ):
        assert "Noted." in str(await one.chat("remember: my locker code is 7319", user="alice"))
        before = len(fake.message_requests)
        reply = await other.chat("what is my locker code?", user="alice")
        assert "7319" in str(reply)
        recalled = fake.message_requests[before].last_user_text
        assert RECALL_HEADER in recalled and "7319" in recalled
        cli = write_config(tmp_path, config)
        code, out, err = await run_cli(tmp_path, "memory", "search", "locker", "--config", str(cli))
        assert code == 0, err
        assert "7319" in out and out.startswith("memory/people/local-alice/")
