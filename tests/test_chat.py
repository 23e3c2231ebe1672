"""`krill chat` as a person uses it: Ctrl-C ends it at once, and its log lines stay out of
the conversation (stderr at WARNING, or a file) unless asked for."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import signal
import sys
from pathlib import Path

from tests.fakes.anthropic import FakeAnthropic
from tests.krill_process import run_cli, write_config
from tests.test_e2e_local import model_env, plain_echo

PLANTED = "the vault combination is PLANTED-4711"


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


async def ctrl_c_after(
    tmp_path: Path, fake: FakeAnthropic, config: Path, text: bytes, shown: bytes
) -> tuple[int, str]:
    """Chat on a terminal as ann: type `text`, press Ctrl-C once `shown` is on the screen;
    (exit code, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KRILL_", "ANTHROPIC_"))}
    terminal, keyboard = pty.openpty()  # stdin is a terminal, as when a person chats
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "chat",
        "--name",
        "ann",
        "--config",
        str(config),
        cwd=tmp_path,
        env=env | model_env(fake),
        stdin=keyboard,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        # A suite started in the background inherits SIGINT ignored, and so would the chat:
        # a person's terminal delivers Ctrl-C to it.
        preexec_fn=_interruptible,
    )
    os.close(keyboard)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        os.write(terminal, text)
        seen = b""
        while shown not in seen:
            seen += await asyncio.wait_for(proc.stdout.read(1024), 60)
        proc.send_signal(signal.SIGINT)
        # Generous: shutting down is slow on a loaded machine.
        code = await asyncio.wait_for(proc.wait(), 30)
        err = (await proc.stderr.read()).decode()
    finally:
        os.close(terminal)
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return code, err


async def test_ctrl_c_ends_chat_at_once(tmp_path: Path, fake_anthropic: FakeAnthropic):
    fake_anthropic.default_handler = plain_echo
    config = write_config(tmp_path, {})
    # The chat now waits for the next line at its prompt; before, Ctrl-C waited for Enter
    # forever.
    code, err = await ctrl_c_after(tmp_path, fake_anthropic, config, b"hello\n", b"echo: hello")
    assert code in (0, 130), err
    assert "Traceback" not in err


async def test_a_reply_cut_short_by_ctrl_c_is_not_printed_again(
    tmp_path: Path, fake_anthropic: FakeAnthropic
):
    """Ctrl-C while a reply streams drops that message, like /stop: the next chat answers
    only what is said in it."""
    fake_anthropic.default_handler = plain_echo
    fake_anthropic.chunk_delay = 0.3  # a slow reply, seen streaming on the screen
    config = write_config(tmp_path, {})
    words = b"one two three four five six seven eight nine ten"
    code, err = await ctrl_c_after(tmp_path, fake_anthropic, config, words + b"\n", b"echo:")
    assert code in (0, 130), err
    fake_anthropic.chunk_delay = 0.0
    code, out, err = await run_cli(
        tmp_path,
        "chat",
        "--name",
        "ann",
        "--config",
        str(config),
        env=model_env(fake_anthropic),
        stdin=b"later\n",
    )
    assert code == 0, err
    assert out.strip() == "echo: later"


async def test_chat_logs_stay_quiet_and_can_go_to_a_file(
    tmp_path: Path, fake_anthropic: FakeAnthropic
):
    fake_anthropic.default_handler = plain_echo
    quiet = write_config(tmp_path, {})
    code, out, err = await run_cli(
        tmp_path, "chat", "--config", str(quiet), env=model_env(fake_anthropic), stdin=b"hi\n"
    )
    assert code == 0 and out.strip() == "echo: hi"
    assert err == ""  # INFO lines (store, model calls) would mix into the conversation
    logged = write_config(tmp_path, {"logging": {"level": "INFO", "file": "logs/krill.log"}})
    code, out, err = await run_cli(
        tmp_path, "chat", "--config", str(logged), env=model_env(fake_anthropic), stdin=b"hi\n"
    )
    assert code == 0 and out.strip() == "echo: hi" and err == ""
    assert "INFO" in (tmp_path / "logs" / "krill.log").read_text()


async def chat_log(
    tmp_path: Path, fake: FakeAnthropic, logging: dict[str, object], *args: str
) -> list[dict[str, object]]:
    """Chat one planted message at DEBUG in JSON; the log lines, each parsed."""
    fake.default_handler = plain_echo
    config = write_config(tmp_path, {"logging": {"format": "json"} | logging})
    env = model_env(fake) | {"ANTHROPIC_API_KEY": "sk-ant-api03-secretsecretsecret"}
    code, out, err = await run_cli(
        tmp_path,
        "chat",
        "--name",
        "ann",
        "--log-level",
        "debug",
        *args,
        "--config",
        str(config),
        env=env,
        stdin=f"{PLANTED}\n".encode(),
    )
    assert code == 0, err
    assert out.strip() == f"echo: {PLANTED}"
    assert "secretsecretsecret" not in err
    return [json.loads(line) for line in err.splitlines()]


async def test_json_lines_carry_the_turn(tmp_path: Path, fake_anthropic: FakeAnthropic):
    lines = await chat_log(tmp_path, fake_anthropic, {})
    assert {"time", "level", "logger", "message", "turn_id", "session_key"} <= set(lines[0])
    in_turn = [line for line in lines if line["turn_id"]]
    assert in_turn, lines
    assert {line["session_key"] for line in in_turn} == {"agent:main:local:direct:ann"}
    assert len({line["turn_id"] for line in in_turn}) == 1
    # Outside a turn (start-up, shutdown) the fields are present and empty.
    assert any(line["turn_id"] is None for line in lines)


async def test_message_bodies_only_with_include_content(
    tmp_path: Path, fake_anthropic: FakeAnthropic
):
    hidden = await chat_log(tmp_path, fake_anthropic, {})
    assert "PLANTED-4711" not in json.dumps(hidden)
    assert any(f"<{len(PLANTED)} chars>" in str(line["message"]) for line in hidden)
    shown = await chat_log(tmp_path, fake_anthropic, {"include_content": True})
    assert "PLANTED-4711" in json.dumps(shown)


async def test_each_turn_logs_one_info_line_without_its_text(
    tmp_path: Path, fake_anthropic: FakeAnthropic
):
    fake_anthropic.default_handler = plain_echo
    config = write_config(tmp_path, {"logging": {"format": "json"}})
    code, _, err = await run_cli(
        tmp_path,
        "chat",
        "--name",
        "ann",
        "--log-level",
        "info",
        "--config",
        str(config),
        env=model_env(fake_anthropic),
        stdin=f"{PLANTED}\nsecond message\n".encode(),
    )
    assert code == 0, err
    lines = [json.loads(line) for line in err.splitlines()]
    turns = [line for line in lines if str(line["message"]).startswith("turn ")]
    assert len(turns) == 2, turns
    for line in turns:
        message = str(line["message"])
        assert line["level"] == "INFO"
        assert "answered in" in message and "session agent:main:local:direct:ann" in message
        assert re.search(r"model claude-\S+, 1 call\(s\), tokens [1-9]\d* in ", message), message
        assert re.search(r", [1-9]\d* out, cost \$\d+\.\d{4}$", message), message
    assert "PLANTED" not in err and "second message" not in err
