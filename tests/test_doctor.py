"""`krill doctor` tells the truth: real calls to the model and the platforms, the port and the
store's folder, a non-zero exit whenever something would stop or degrade the service, and
messages that name where a value came from."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.fs_faults import read_only
from tests.krill_process import run_cli, write_config


@pytest.fixture
def dead_url() -> Iterator[str]:
    """A loopback address where nothing answers: connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def lines(out: str, name: str) -> str:
    return "\n".join(line for line in out.splitlines() if line.split(":")[0].endswith(name))


async def doctor(directory: Path, config: Path, env: dict[str, str]) -> tuple[int, str]:
    code, out, err = await run_cli(directory, "doctor", "--config", str(config), env=env)
    assert "Traceback" not in out + err
    return code, out


async def test_an_unreachable_model_fails(tmp_path: Path, dead_url: str) -> None:
    config = write_config(tmp_path, {})
    code, out = await doctor(
        tmp_path, config, {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": dead_url}
    )
    assert code == 1, out
    found = lines(out, "anthropic")
    assert found.startswith("[FAIL]") and dead_url in found
    assert "anthropic.base_url (from ANTHROPIC_BASE_URL)" in found


async def test_an_unreachable_telegram_fails(
    tmp_path: Path, fake_anthropic: FakeAnthropic, dead_url: str
) -> None:
    telegram = {"enabled": True, "token": "1:abc", "api_base_url": dead_url}
    config = write_config(tmp_path, {"telegram": telegram})
    code, out = await doctor(tmp_path, config, fake_anthropic.env())
    assert code == 1, out
    assert lines(out, "anthropic").startswith("[ok]")
    found = lines(out, "telegram")
    assert found.startswith("[FAIL]") and f"telegram.api_base_url in {config}" in found


async def test_a_reaction_telegram_refuses_fails(
    tmp_path: Path, fake_anthropic: FakeAnthropic, fake_telegram: FakeTelegram
) -> None:
    telegram = {
        "enabled": True,
        "token": fake_telegram.token,
        "api_base_url": fake_telegram.url,
        "done_reaction": "✅",
    }
    config = write_config(tmp_path, {"telegram": telegram})
    code, out = await doctor(tmp_path, config, fake_anthropic.env())
    assert code == 1, out
    found = lines(out, "telegram")
    assert found.startswith("[FAIL]") and "telegram.done_reaction" in found and "✅" in found
    assert "👍" in found  # the emoji Telegram does accept are listed


async def test_a_rejected_token_names_the_file_it_came_from(
    tmp_path: Path, fake_anthropic: FakeAnthropic, fake_telegram: FakeTelegram
) -> None:
    telegram = {"enabled": True, "token": "1:wrong", "api_base_url": fake_telegram.url}
    config = write_config(tmp_path, {"telegram": telegram})
    env = fake_anthropic.env() | {"TELEGRAM_BOT_TOKEN": fake_telegram.token}
    code, out = await doctor(tmp_path, config, env)
    assert code == 1, out
    found = lines(out, "telegram")
    assert f"telegram.token in {config}" in found and "TELEGRAM_BOT_TOKEN" not in found
    # The same token from the environment is named as such (and works).
    del telegram["token"]
    config = write_config(tmp_path, {"telegram": telegram})
    code, out = await doctor(tmp_path, config, env)
    assert code == 0 and lines(out, "telegram").startswith("[ok]"), out


async def test_a_taken_port_fails(tmp_path: Path, fake_anthropic: FakeAnthropic) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = write_config(tmp_path, {"server": {"port": port}})
        code, out = await doctor(tmp_path, config, fake_anthropic.env())
    assert code == 1, out
    found = lines(out, "port")
    assert found.startswith("[FAIL]") and f"server.port in {config}" in found


async def test_a_store_that_cannot_be_created_fails(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    config = write_config(tmp_path, {"storage": {"url": "sqlite:///locked/data/krill.db"}})
    with read_only(locked) as really:
        if not really:
            pytest.skip("cannot make a folder read-only here")
        code, out = await doctor(tmp_path, config, fake_anthropic.env())
    assert code == 1, out
    found = lines(out, "store")
    assert found.startswith("[FAIL]") and str(locked) in found and "storage.url" in found
    assert not (locked / "data").exists()


async def test_a_missing_workspace_that_is_not_the_default_fails(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    config = write_config(tmp_path, {"workspace": {"path": "elsewhere"}})
    code, out = await doctor(tmp_path, config, fake_anthropic.env())
    assert code == 1, out
    assert f"workspace.path in {config}" in lines(out, "workspace")


async def test_a_reserve_below_the_floor_is_a_warning_that_says_what_is_used(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    config = write_config(tmp_path, {"context": {"reserve_tokens": 0}})
    code, out = await doctor(tmp_path, config, fake_anthropic.env())
    warned = [line for line in out.splitlines() if line.startswith("[warn] config:")]
    assert warned == [
        "[warn] config: context.reserve_tokens = 0 is below context.reserve_tokens_floor "
        "(20,000); using 20,000, so a reply, a tool result or a summary request still fits "
        "before the window is full"
    ]
    assert code == 0, out  # the service runs with the floor: degraded by nothing
