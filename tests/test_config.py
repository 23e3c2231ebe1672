"""Configuration: TOML + KRILL_* overrides + conventional secrets, with errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import env_overrides, load_config
from bot.errors import ConfigError
from channels.registry import CHANNELS


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "krill.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_defaults_without_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config(None, env={}, channels=CHANNELS)
    assert config.source is None
    assert config.agent.model == "claude-sonnet-4-6"
    assert config.anthropic.cache_ttl == "5m" and config.cache_ttl_seconds == 300
    assert config.sqlite_path == tmp_path / "data" / "krill.db"
    # Under the data folder: ./workspace is the template the quick start copies there.
    assert config.workspace_dir == tmp_path / "data" / "workspace"
    assert config.server.port == 8787 and config.server.host == "127.0.0.1"
    assert config.telegram.dm_policy == "allowlist" and config.telegram.require_mention
    assert config.telegram.group_buffer_limit == 50
    assert config.session.dm_scope == "per-channel-peer"
    assert config.tools.allow == ["*"]


def test_relative_paths_resolve_against_the_config_folder(tmp_path: Path) -> None:
    sub = tmp_path / "site"
    sub.mkdir()
    config = load_config(write(sub, '[workspace]\npath = "ws"\n'), env={}, channels=CHANNELS)
    assert config.workspace_dir == sub.resolve() / "ws"
    assert config.sqlite_path == sub.resolve() / "data" / "krill.db"


def test_full_design_config_is_accepted(tmp_path: Path) -> None:
    text = """
[agent]
model = "claude-opus-4-7"
max_tokens = 8000
context_window = 1000000
timezone = "Europe/Berlin"
[anthropic]
base_url = "http://127.0.0.1:1"
cache_ttl = "1h"
[admin]
users = ["telegram:12345", "slack:U0123ABC"]
[session]
dm_scope = "per-peer"
identity_links = { alice = ["telegram:123", "slack:U1"] }
[telegram]
enabled = true
token = "123:abc"
mode = "webhook"
webhook_secret = "s3cret"
dm_policy = "pairing"
allow_from = ["1", "2"]
dm_history_limit = 20
[telegram.dms."12345"]
history_limit = 10
person_daily_usd = 5.0
[telegram.groups."-100123"]
require_mention = false
history_limit = 5
allow = true
group_monthly_usd = 0
[slack]
enabled = true
bot_token = "xoxb-1"
signing_secret = "sig"
mode = "http"
[slack.channels."C123"]
require_mention = false
group_daily_usd = 2.5
[budgets]
daily_usd = 20
monthly_usd = 300
person_daily_usd = 1.5
person_monthly_usd = 20
group_daily_usd = 4
group_monthly_usd = 60
warn_at = 0.9
admins_capped = true
contact = "Dana in #it-help"
[tools]
allow = ["memory_*", "web_fetch"]
deny = ["web_fetch"]
[tools.web_fetch]
allow_private = true
max_chars = 1000
[mcp.servers.example]
command = "some-mcp-server"
"""
    config = load_config(write(tmp_path, text), env={}, channels=CHANNELS)
    assert config.telegram.dms["12345"].history_limit == 10
    assert config.telegram.groups["-100123"].require_mention is False
    assert config.slack.channels["C123"].require_mention is False
    assert config.session.identity_links["alice"] == ["telegram:123", "slack:U1"]
    assert config.cache_ttl_seconds == 3600
    assert config.mcp.servers["example"].command == "some-mcp-server"
    budgets = config.budgets
    assert (budgets.daily_usd, budgets.monthly_usd, budgets.warn_at) == (20, 300, 0.9)
    assert budgets.admins_capped and budgets.contact == "Dana in #it-help"
    assert config.telegram.dms["12345"].person_daily_usd == 5.0
    assert config.telegram.dms["12345"].person_monthly_usd is None  # [budgets]'s applies
    assert config.telegram.groups["-100123"].group_monthly_usd == 0  # no cap for this group
    assert config.slack.channels["C123"].group_daily_usd == 2.5


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[agent]\nmodle = 'x'\n", "agent.modle: unknown key"),
        ("[nonsense]\nx = 1\n", "nonsense: unknown key"),
        ("[server]\nport = 'x'\n", "server.port: "),
        ("[server]\nport = 70000\n", "server.port: "),
        ("[anthropic]\ncache_ttl = '10m'\n", "anthropic.cache_ttl: "),
        ("[telegram.dms.'1']\nhistory_limit = -1\n", "telegram.dms.1.history_limit"),
        ("[agent]\ntimezone = 'Mars/Olympus'\n", "agent.timezone: unknown time zone"),
        ("[admin]\nusers = ['12345']\n", "admin.users: '12345' must look like"),
        ("[budgets]\ndaily_usd = -1\n", "budgets.daily_usd: "),
        ("[budgets]\nwarn_at = 80\n", "budgets.warn_at: "),
        ("[budgets]\nperson_daily = 1\n", "budgets.person_daily: unknown key"),
        ("[slack.channels.'C1']\ngroup_daily_usd = -2\n", "slack.channels.C1.group_daily_usd"),
        ("[slack]\nenabled = true\nbot_token = 'x'\n", "slack.app_token: required"),
        ("x = [\n", "not valid TOML"),
    ],
)
def test_errors_name_the_key_and_the_file(tmp_path: Path, text: str, needle: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(path, env={}, channels=CHANNELS)
    assert needle in str(err.value)
    assert path in str(err.value)


@pytest.mark.parametrize(
    ("text", "key", "echoed"),
    [
        ("[telegram]\ntoken = 5550123456789\n", "telegram.token", False),
        ("[slack]\nsigning_secret = 5550123456789\n", "slack.signing_secret", False),
        ("[admin]\nconsole_token = 5550123456789\n", "admin.console_token", False),
        ("[mcp.servers.x]\ncommand = 'x'\nenv = { PASS = 5550123456789 }\n", "env.PASS", False),
        ("[server]\nport = 5550123456789\n", "server.port", True),  # not a secret: echoed
    ],
)
def test_a_wrongly_typed_secret_is_named_but_never_echoed(
    tmp_path: Path, text: str, key: str, echoed: bool
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(path, env={}, channels=CHANNELS)
    assert key in str(err.value)
    assert ("5550123456789" in str(err.value)) is echoed


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(str(tmp_path / "nope.toml"), env={}, channels=CHANNELS)


def test_krill_config_variable_is_used(tmp_path: Path) -> None:
    path = write(tmp_path, "[agent]\nmax_tokens = 123\n")
    config = load_config(None, env={"KRILL_CONFIG": path}, channels=CHANNELS)
    assert config.agent.max_tokens == 123


def test_env_overrides_win_and_are_typed(tmp_path: Path) -> None:
    path = write(tmp_path, "[telegram]\nmode = 'polling'\n[server]\nport = 1\n")
    env = {
        "KRILL_TELEGRAM__MODE": "webhook",
        "KRILL_TELEGRAM__WEBHOOK_SECRET": "abc",
        "KRILL_SERVER__PORT": "9999",
        "KRILL_TELEGRAM__ALLOW_FROM": '["1", "2"]',
        "KRILL_TOOLS__WEB_FETCH__ALLOW_PRIVATE": "true",
    }
    config = load_config(path, env=env, channels=CHANNELS)
    assert config.telegram.mode == "webhook"
    assert config.server.port == 9999
    assert config.telegram.allow_from == ["1", "2"]
    assert config.tools.web_fetch.allow_private is True


def test_env_override_with_unknown_key_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"agent\.modle: unknown key"):
        load_config(None, env={"KRILL_AGENT__MODLE": "x"}, channels=CHANNELS)


def test_env_overrides_parse_literals() -> None:
    assert env_overrides({"KRILL_A__B": "10", "KRILL_A__C": "hello", "OTHER": "x"}) == {
        "a": {"b": 10, "c": "hello"}
    }


def test_conventional_secret_variables(tmp_path: Path) -> None:
    env = {
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:5",
        "TELEGRAM_BOT_TOKEN": "123:tok",
        "SLACK_BOT_TOKEN": "xoxb-a",
        "SLACK_APP_TOKEN": "xapp-b",
        "SLACK_SIGNING_SECRET": "sig",
    }
    path = write(tmp_path, "[telegram]\nenabled = true\n[slack]\nenabled = true\n")
    config = load_config(path, env=env, channels=CHANNELS)
    assert config.anthropic.api_key == "sk-ant-test"
    assert config.anthropic.base_url == "http://127.0.0.1:5"
    assert config.telegram.token == "123:tok"
    assert (config.slack.bot_token, config.slack.app_token) == ("xoxb-a", "xapp-b")


def test_file_values_beat_conventional_variables(tmp_path: Path) -> None:
    path = write(tmp_path, "[anthropic]\napi_key = 'from-file'\n")
    assert (
        load_config(path, env={"ANTHROPIC_API_KEY": "env"}, channels=CHANNELS).anthropic.api_key
        == "from-file"
    )


def test_models_tables_set_each_models_window_and_output_limit(tmp_path: Path) -> None:
    text = """
[agent]
context_window = 300000
[models."claude-haiku-4-5"]
max_output_tokens = 8000
[models."claude-sonnet-4-6"]
context_window = 900000
[models."my-local-model"]
context_window = 32000
"""
    config = load_config(write(tmp_path, text), env={}, channels=CHANNELS)
    # Known: Haiku 4.5 takes 200k, below the 300k Krill would use; its output is configured.
    haiku = config.model_limits("claude-haiku-4-5")
    assert (haiku.context_window, haiku.window_source, haiku.max_output_tokens) == (
        200_000,
        "model",
        8000,
    )
    # Its own table wins over agent.context_window, in either direction.
    assert config.model_limits("claude-sonnet-4-6").context_window == 900_000
    assert config.model_limits("my-local-model").context_window == 32_000
    # Known to take 1M: agent.context_window is the ceiling Krill works with.
    opus = config.model_limits("claude-opus-4-7")
    assert (opus.context_window, opus.window_source) == (300_000, "config")
    assert opus.max_output_tokens == 128_000
    unknown = config.model_limits("some-other-model")
    assert (unknown.context_window, unknown.max_output_tokens) == (300_000, None)


def test_a_models_table_rejects_unknown_keys_and_tiny_windows(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"models\.claude-haiku-4-5\.context_windw"):
        load_config(
            write(tmp_path, '[models."claude-haiku-4-5"]\ncontext_windw = 1\n'),
            env={},
            channels=CHANNELS,
        )
    with pytest.raises(ConfigError, match="context_window"):
        load_config(
            write(tmp_path, '[models."claude-haiku-4-5"]\ncontext_window = 10\n'),
            env={},
            channels=CHANNELS,
        )


def test_a_reserve_below_the_floor_is_raised_and_said(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path, "[context]\nreserve_tokens = 4000\n"), env={}, channels=CHANNELS
    )
    assert config.context.reserve == 20_000
    (line,) = config.adjustments()
    assert "context.reserve_tokens = 4,000" in line and "using 20,000" in line
    lowered = load_config(
        write(tmp_path, "[context]\nreserve_tokens = 4000\nreserve_tokens_floor = 2000\n"),
        env={},
        channels=CHANNELS,
    )
    assert lowered.context.reserve == 4000 and lowered.adjustments() == []
    assert load_config(write(tmp_path, ""), env={}, channels=CHANNELS).adjustments() == []
