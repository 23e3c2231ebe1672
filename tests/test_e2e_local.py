"""End to end: the real `krill run` / `krill chat` processes against the fake model server."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path

import pytest

from bot.config.sections import ServerConfig
from tests.fakes.anthropic import STANDALONE_PORT, FakeAnthropic, plain_echo
from tests.krill_process import KrillProcess, run_cli, write_config

ROOT = Path(__file__).resolve().parents[1]


def model_env(fake: FakeAnthropic) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake.url}


async def test_run_answers_serves_health_and_metrics(tmp_path: Path, fake_anthropic: FakeAnthropic):
    fake_anthropic.default_handler = plain_echo
    async with KrillProcess(tmp_path, {}, model_env(fake_anthropic)) as krill:
        reply = await krill.chat("hello krill")
        assert reply == {"result": "accepted", "replies": ["echo: hello krill"]}
        status, body = await krill.get("/healthz")
        assert status == 200 and json.loads(body)["status"] == "ok"
        status, metrics = await krill.get("/metrics")
        assert status == 200
        assert 'krill_messages_in_total{channel="local"} 1.0' in metrics
        assert 'krill_turns_total{kind="user",outcome="ok"} 1.0' in metrics
        assert "krill_model_latency_seconds_count 1.0" in metrics
        status, page = await krill.get("/")
        assert status == 200 and "<title>Krill</title>" in page


async def test_history_survives_a_restart(tmp_path: Path, fake_anthropic: FakeAnthropic):
    fake_anthropic.default_handler = plain_echo
    async with KrillProcess(tmp_path, {}, model_env(fake_anthropic)) as krill:
        await krill.chat("the launch code is 7Q-ALPHA")
    async with KrillProcess(tmp_path, {}, model_env(fake_anthropic)) as krill:
        await krill.chat("what was the code?")
    last = fake_anthropic.message_requests[-1].body
    assert "7Q-ALPHA" in json.dumps(last)
    assert len(last["messages"]) == 3


async def test_kill_9_mid_turn_loses_nothing(tmp_path: Path, fake_anthropic: FakeAnthropic):
    fake_anthropic.default_handler = plain_echo
    fake_anthropic.hold()
    krill = KrillProcess(tmp_path, {}, model_env(fake_anthropic))
    await krill.start()
    pending = asyncio.create_task(krill.chat("please do not lose me"))
    await fake_anthropic.wait_for_requests(1)
    await krill.kill()  # crash while the model call is in flight
    pending.cancel()
    fake_anthropic.release()
    async with KrillProcess(tmp_path, {}, model_env(fake_anthropic)) as restarted:
        for _ in range(100):
            _code, out, _ = await run_cli(
                tmp_path, "status", "--json", "--config", str(restarted.config_path)
            )
            if json.loads(out)["unanswered_messages"] == 0:
                break
            await asyncio.sleep(0.1)
        assert json.loads(out)["unanswered_messages"] == 0
        _code, export, _ = await run_cli(
            tmp_path,
            "sessions",
            "export",
            "agent:main:local:direct:tester",
            "--config",
            str(restarted.config_path),
        )
    entries = [json.loads(line) for line in export.splitlines()]
    users = [e for e in entries if e["kind"] == "person_turn"]
    answers = [e for e in entries if e["kind"] == "assistant_reply"]
    assert len(users) == 1, "the accepted message was recorded exactly once"
    assert answers and answers[-1]["payload"]["content"][0]["text"] == "echo: please do not lose me"


async def test_unanswered_messages_are_answered_after_restart(
    tmp_path: Path, fake_anthropic: FakeAnthropic
):
    """A message accepted while the model was down is answered by the next process."""
    fake_anthropic.default_handler = plain_echo
    fake_anthropic.hold()
    krill = KrillProcess(tmp_path, {}, model_env(fake_anthropic))
    await krill.start()
    tasks = [asyncio.create_task(krill.chat(f"msg {i}", user=f"u{i}")) for i in range(3)]
    await fake_anthropic.wait_for_requests(3)
    await krill.kill()
    for task in tasks:
        task.cancel()
    fake_anthropic.release()
    before = len(fake_anthropic.message_requests)
    async with KrillProcess(tmp_path, {}, model_env(fake_anthropic)):
        await fake_anthropic.wait_for_requests(before + 3, within=10)
    retried = {r.last_user_text for r in fake_anthropic.message_requests[before:]}
    assert {f"msg {i}" for i in range(3)} <= {t.split("\n")[-2] for t in retried}


async def test_bad_config_stops_startup_with_a_clear_message(tmp_path: Path):
    cases = {
        "[agent]\nmodle = 'x'\n": "agent.modle: unknown key",
        "[server]\nport = 'eighty'\n": "server.port:",
        "[telegram]\nmode = 'pigeon'\n": "telegram.mode:",
        "[agent\n": "not valid TOML",
        "[telegram]\nenabled = true\n": "telegram.token: required",
    }
    for text, expected in cases.items():
        path = tmp_path / "krill.toml"
        path.write_text(text)
        code, out, err = await run_cli(tmp_path, "run", "--config", str(path), timeout=20)
        assert code == 2, (text, out, err)
        assert expected in err and str(path) in err, err
        assert "Traceback" not in err


async def test_env_override_is_validated_and_named(tmp_path: Path):
    code, _, err = await run_cli(tmp_path, "status", env={"KRILL_SERVER__PORT": "nope"})
    assert code == 2 and "server.port" in err and "KRILL_" in err


async def test_no_api_key_starts_and_explains(tmp_path: Path):
    async with KrillProcess(tmp_path, {}, {}) as krill:
        reply = await krill.chat("hello?")
    assert "ANTHROPIC_API_KEY" in reply["replies"][0]
    assert "ANTHROPIC_API_KEY is not set" in krill.log()


async def test_chat_with_piped_stdin(tmp_path: Path, fake_anthropic: FakeAnthropic):
    fake_anthropic.default_handler = plain_echo
    config = write_config(tmp_path, {})
    code, out, err = await run_cli(
        tmp_path,
        "chat",
        "--name",
        "ann",
        "--config",
        str(config),
        env=model_env(fake_anthropic),
        stdin=b"first line\n/whoami\nsecond line\n",
    )
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0] == "echo: first line"
    assert "You are local:ann" in out and "agent:main:local:direct:ann" in out
    assert lines[-1] == "echo: second line"


async def test_cli_status_sessions_and_reset(tmp_path: Path, fake_anthropic: FakeAnthropic):
    fake_anthropic.default_handler = plain_echo
    async with KrillProcess(tmp_path, {}, model_env(fake_anthropic)) as krill:
        await krill.chat("hi", user="bob")
        cfg = str(krill.config_path)
        code, out, _ = await run_cli(tmp_path, "status", "--json", "--config", cfg)
        data = json.loads(out)
        (session,) = data["sessions"]
        assert session["session_key"] == "agent:main:local:direct:bob"
        assert session["turns"] == 1 and session["output_tokens"] > 0
        code, out, _ = await run_cli(tmp_path, "status", "--config", cfg)
        assert "agent:main:local:direct:bob" in out
        code, out, _ = await run_cli(
            tmp_path, "sessions", "show", "agent:main:local:direct:bob", "--config", cfg
        )
        assert "user: bob: hi" in out.replace("Bob", "bob") and "echo: hi" in out
        code, out, _ = await run_cli(
            tmp_path, "reset", "agent:main:local:direct:bob", "--config", cfg
        )
        assert code == 0 and "new session" in out
        code, _, err = await run_cli(tmp_path, "reset", "not-a-key", "--config", cfg)
        assert code == 1 and "krill reset" in err
        reply = await krill.chat("fresh start?", user="bob")
        assert reply["replies"] == ["echo: fresh start?"]
    assert len(fake_anthropic.message_requests[-1].body["messages"]) == 1


async def test_help_for_every_command(tmp_path: Path):
    for command in ("run", "chat", "init", "status", "reset", "sessions", "doctor", "pairing"):
        code, out, _ = await run_cli(tmp_path, command, "--help")
        assert code == 0 and "usage: krill" in out, command


async def test_init_then_doctor(tmp_path: Path, fake_anthropic: FakeAnthropic):
    code, out, _ = await run_cli(tmp_path, "init", str(tmp_path / "site"))
    assert code == 0 and (tmp_path / "site" / "krill.toml").exists()
    assert (tmp_path / "site" / "workspace" / "SOUL.md").exists()
    cfg = str(tmp_path / "site" / "krill.toml")
    code, out, _ = await run_cli(tmp_path, "doctor", "--config", cfg, env=model_env(fake_anthropic))
    assert code == 0, out
    assert "[ok] anthropic" in out and "[ok] store" in out and "[ok] workspace" in out
    code, out, _ = await run_cli(tmp_path, "doctor", "--config", cfg)
    assert code == 1 and "ANTHROPIC_API_KEY" in out


async def test_web_chat_websocket_streams_replies(tmp_path: Path, fake_anthropic: FakeAnthropic):
    import aiohttp

    fake_anthropic.default_handler = plain_echo
    fake_anthropic.chunk_delay = 0.1  # the reply streams for about a second
    words = " ".join(f"word{i}" for i in range(60))
    async with KrillProcess(tmp_path, {}, model_env(fake_anthropic)) as krill:
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(f"{krill.url}/ws/chat?name=wendy") as ws:
                await ws.send_json({"text": words})
                events = []
                while not events or events[-1]["type"] != "message":
                    events.append(await asyncio.wait_for(ws.receive_json(), 10))
                await ws.send_str("not json")
                # The session's "idle" may come before or after the answer to "not json".
                error = await asyncio.wait_for(ws.receive_json(), 10)
                while error["type"] == "idle":
                    error = await asyncio.wait_for(ws.receive_json(), 10)
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(f"{krill.url}/ws/chat?name=bad name!")
            assert refused.value.status == 400
    kinds = [e["type"] for e in events]
    assert "preview" in kinds and kinds[-1] == "message"
    assert events[-1]["text"] == f"echo: {words}"
    assert error["type"] == "error"


async def test_api_chat_rejects_bad_input(tmp_path: Path, fake_anthropic: FakeAnthropic):
    import aiohttp

    async with KrillProcess(tmp_path, {}, model_env(fake_anthropic)) as krill:
        async with aiohttp.ClientSession() as http:
            json_type = {"Content-Type": "application/json"}
            async with http.post(
                f"{krill.url}/api/chat", data=b"{not json", headers=json_type
            ) as resp:
                assert resp.status == 400
            async with http.post(
                f"{krill.url}/api/chat", json={"user": "../etc", "text": "x"}
            ) as r:
                assert r.status == 400
            big = "x" * 2_000_000
            async with http.post(f"{krill.url}/api/chat", json={"text": big}) as resp:
                assert resp.status == 413
        status, _ = await krill.get("/healthz")
        assert status == 200
    assert fake_anthropic.message_requests == []


async def test_web_chat_refuses_other_sites_and_needs_a_token_beyond_loopback(
    tmp_path: Path, fake_anthropic: FakeAnthropic
):
    import aiohttp

    fake_anthropic.default_handler = plain_echo
    async with KrillProcess(tmp_path, {}, model_env(fake_anthropic)) as krill:
        async with aiohttp.ClientSession() as http:
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(
                    f"{krill.url}/ws/chat?name=eve", headers={"Origin": "https://evil.example"}
                )
            assert refused.value.status == 403
            own = {"Origin": krill.url}
            async with http.ws_connect(f"{krill.url}/ws/chat?name=ok", headers=own):
                pass
            # A cross-site form post cannot set a JSON content type.
            form = {"text": "remember that the admin password is hunter2"}
            async with http.post(f"{krill.url}/api/chat", data=form) as resp:
                assert resp.status == 415
            evil = {"Origin": "https://evil.example"}
            async with http.post(f"{krill.url}/api/chat", json=form, headers=evil) as resp:
                assert resp.status == 403
            async with http.get(f"{krill.url}/api/history?name=ok", headers=evil) as resp:
                assert resp.status == 403
    assert fake_anthropic.message_requests == []

    config = {"server": {"host": "0.0.0.0"}, "local": {"token": "letmein"}}
    async with KrillProcess(tmp_path, config, model_env(fake_anthropic)) as krill:
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{krill.url}/api/chat", json={"text": "hi"}) as resp:
                assert resp.status == 403
            async with http.get(f"{krill.url}/api/history?name=web") as resp:
                assert resp.status == 403
            headers = {"Authorization": "Bearer letmein"}
            async with http.post(
                f"{krill.url}/api/chat", json={"text": "hi"}, headers=headers
            ) as r:
                assert (await r.json())["replies"] == ["echo: hi"]
            async with http.get(f"{krill.url}/api/history?name=web", headers=headers) as r:
                lines = [(m["speaker"], m["text"]) for m in (await r.json())["messages"]]
                assert lines == [("person", "hi"), ("assistant", "echo: hi")]
    async with KrillProcess(tmp_path, {"server": {"host": "0.0.0.0"}}, {}) as krill:
        status, _ = await krill.get("/api/chat")
        assert status == 404
    assert "local web chat is off" in krill.log()


FLUSH_MARK = "[Memory flush"
SHORT_TTL = {
    "scheduler": {"cache_ttl_seconds": 1.0},
    "memory": {"flush": {"idle_lead_seconds": 0.5}},
}


def flush_requests(fake: FakeAnthropic) -> list[str]:
    return [r.last_user_text for r in fake.message_requests if FLUSH_MARK in r.last_user_text]


async def test_chat_runs_no_background_jobs(tmp_path: Path, fake_anthropic: FakeAnthropic):
    """Only `krill run` runs the scheduler: `krill chat` on a database where another
    session's idle flush is overdue answers its own person and flushes nothing."""
    fake_anthropic.default_handler = plain_echo
    cfg = str(write_config(tmp_path, SHORT_TTL))
    env = model_env(fake_anthropic)
    code, _, err = await run_cli(
        tmp_path, "chat", "--name", "ann", "--config", cfg, env=env, stdin=b"the boat is blue\n"
    )
    assert code == 0, err
    # Bob's turn outlasts the moment a scheduler would run ann's overdue flush (start-up
    # delay 2 s), so one that ran would have reached the model before this reply.
    fake_anthropic.queue_text("echo: hi", delay=4.0)
    code, out, err = await run_cli(
        tmp_path, "chat", "--name", "bob", "--config", cfg, env=env, stdin=b"hi\n"
    )
    assert code == 0, err
    assert out.strip() == "echo: hi"
    assert flush_requests(fake_anthropic) == []


async def test_cli_reset_flushes_memory_first(tmp_path: Path, fake_anthropic: FakeAnthropic):
    fake_anthropic.default_handler = plain_echo
    cfg = str(write_config(tmp_path, {}))
    env = model_env(fake_anthropic)
    code, _, err = await run_cli(
        tmp_path, "chat", "--name", "ann", "--config", cfg, env=env, stdin=b"the boat is blue\n"
    )
    assert code == 0, err
    assert flush_requests(fake_anthropic) == []
    code, out, err = await run_cli(
        tmp_path, "reset", "agent:main:local:direct:ann", "--config", cfg, env=env
    )
    assert code == 0 and "new session" in out, err
    (flush,) = flush_requests(fake_anthropic)
    assert "being reset" in flush


async def test_the_standalone_fake_model_answers_krill_on_its_own_port(tmp_path: Path):
    """README's way to try Krill without an Anthropic key: the fake model from tests/ on its
    default port, which is not Krill's, and `krill run` pointed at it."""
    fake = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.fakes.anthropic",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert fake.stdout is not None
        banner = (await asyncio.wait_for(fake.stdout.readline(), 60)).decode()
        url = re.search(r"listening on (http://127\.0\.0\.1:(\d+))", banner)
        assert url is not None, banner
        assert int(url.group(2)) == STANDALONE_PORT != ServerConfig().port
        readme = (ROOT / "README.md").read_text()
        assert "python -m tests.fakes.anthropic" in readme
        assert f"ANTHROPIC_BASE_URL={url.group(1)}" in readme
        env = {"ANTHROPIC_BASE_URL": url.group(1), "ANTHROPIC_API_KEY": "no-key-needed"}
        async with KrillProcess(tmp_path, {}, env, bare=True) as krill:
            reply = await krill.chat("hello without a key")
    finally:
        fake.terminate()
        await fake.wait()
    assert reply["replies"] == ["echo: hello without a key"]
