"""The deployment config, set up as the Dockerfile does it: deploy/krill.toml in a folder,
`krill init` beside it, then `krill run`: healthy, listening on every interface, store and
workspace in the two folders the container and the systemd unit let it write, web chat off.
And deploy/compose.yaml's shape (docker is not available here to run it): PostgreSQL, three
replicas of one config on it sharing workspace and data, a proxy that checks /healthz."""

from __future__ import annotations

import re
import shutil
import socket
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from bot.config import load_config
from bot.config.loading import secret_variables
from bot.config.root import config_model
from bot.sessions import access
from channels.registry import CHANNELS
from tests.krill_process import KrillProcess, free_port, run_cli
from tests.replica_storage import STORES, storage_url

ROOT = Path(__file__).resolve().parents[1]
DEPLOY_CONFIG = ROOT / "deploy" / "krill.toml"
COMPOSE = ROOT / "deploy" / "compose.yaml"
ENV_EXAMPLE = ROOT / "deploy" / ".env.example"
CADDYFILE = ROOT / "deploy" / "Caddyfile"
CONSOLE_TOKEN = "compose-console-token-0123456789"
REPLICAS = ["krill-1", "krill-2", "krill-3"]
# ${NAME}, ${NAME:-default}, ${NAME:?error}, as Compose interpolates them.
VARIABLE = re.compile(r"\$\{(\w+)(?::([-?])([^}]*))?\}")


def reachable_address() -> str:
    """An address of this host other than loopback, if it has one, else loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a route
        except OSError:  # no route off this host
            return "127.0.0.1"
        return str(s.getsockname()[0])


@pytest.fixture(params=STORES)
def store_env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """SQLite as the config has it, or PostgreSQL named by KRILL_STORAGE__URL, as each
    replica of deploy/compose.yaml runs."""
    if request.param == "sqlite":
        return {}
    return {"KRILL_STORAGE__URL": storage_url(request, tmp_path)}


async def test_deploy_config_runs_as_the_image_sets_it_up(
    tmp_path: Path, store_env: dict[str, str]
) -> None:
    port = free_port()
    # KrillProcess writes its own krill.toml; the deploy file replaces it, the port (which
    # must not clash with other tests) comes from the environment as an operator's would.
    env = {"KRILL_SERVER__PORT": str(port)} | store_env
    krill = KrillProcess(tmp_path, {"server": {"port": port}}, env)
    shutil.copyfile(DEPLOY_CONFIG, krill.config_path)
    code, out, err = await run_cli(tmp_path, "init", str(tmp_path))
    assert code == 0, err
    assert "already exists" in out  # the deploy config is kept
    assert (tmp_path / "workspace" / "SOUL.md").is_file()
    await krill.start()
    try:
        # The SQLite store in data/, or none there when PostgreSQL holds it.
        assert (tmp_path / "data" / "krill.db").is_file() == (not store_env)
        status, _ = await krill.get("/healthz")
        assert status == 200
        address = reachable_address()
        with socket.create_connection((address, port), timeout=5):
            pass  # bound to every interface, not only loopback
        status, _ = await krill.get("/")
        assert status == 404  # no local.token: the web chat stays off beyond loopback
        assert "local.token is not set" in krill.log()
    finally:
        assert await krill.stop() == 0


def interpolated(text: str, env: dict[str, str]) -> str:
    """Compose's variable substitution; a required variable missing is a ValueError, as
    `docker compose` refuses to start without it."""

    def value(m: re.Match[str]) -> str:
        name, kind, default = m.group(1), m.group(2), m.group(3) or ""
        if env.get(name):
            return env[name]
        if kind == "?":
            raise ValueError(f"compose.yaml requires {name}: {default}")
        return default

    return VARIABLE.sub(value, text)


def compose(env: dict[str, str]) -> dict[str, Any]:
    return dict(yaml.safe_load(interpolated(COMPOSE.read_text(), env)))


def test_compose_runs_three_replicas_of_one_config_on_postgres() -> None:
    doc = compose({"POSTGRES_PASSWORD": "s3cret"})
    services = doc["services"]
    assert set(services) == {"postgres", "proxy", *REPLICAS}
    db = services["postgres"]
    assert db["image"].startswith("postgres:15")
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])
    assert any(v.endswith(":/var/lib/postgresql/data") for v in db["volumes"])
    first = services[REPLICAS[0]]
    for name in REPLICAS:
        replica = services[name]
        assert replica == first  # same image, config, environment and volumes everywhere
        assert (ROOT / "deploy" / replica["build"]["context"] / "Dockerfile").is_file()
        assert replica["depends_on"]["postgres"]["condition"] == "service_healthy"
        # Shared named volumes: what one replica writes (memory notes, media) all see.
        assert set(replica["volumes"]) == {
            "data:/var/lib/krill/data",
            "workspace:/var/lib/krill/workspace",
        }
        assert "ports" not in replica  # reached through the proxy only
    assert set(doc["volumes"]) >= {"pgdata", "data", "workspace"}


def test_compose_environment_is_a_valid_krill_config_on_postgres(tmp_path: Path) -> None:
    env = {
        "POSTGRES_PASSWORD": "s3cret",
        "KRILL_TELEGRAM__ENABLED": "true",
        "TELEGRAM_BOT_TOKEN": "123:abc",
        "KRILL_TELEGRAM__WEBHOOK_URL": "https://bot.example.com/telegram/webhook",
        "KRILL_TELEGRAM__WEBHOOK_SECRET": "hook-secret",
    }
    environment = compose(env)["services"][REPLICAS[0]]["environment"]
    # Compose hands YAML booleans to the container as "true"/"false", and an empty value
    # (`${X:-}`) as "".
    replica_env = {
        k: str(v).lower() if isinstance(v, bool) else "" if v is None else str(v)
        for k, v in environment.items()
    }
    # The image's config file with the replica's environment on top, as `krill run` reads it.
    shutil.copyfile(DEPLOY_CONFIG, tmp_path / "krill.toml")
    config = load_config(str(tmp_path / "krill.toml"), replica_env, channels=CHANNELS)
    assert config.storage.url == "postgresql://krill:s3cret@postgres:5432/krill"
    assert config.telegram.enabled and config.telegram.mode == "webhook"
    assert config.telegram.webhook_secret == "hook-secret"
    assert (config.server.host, config.server.port) == ("0.0.0.0", 8787)
    assert config.admin.console_token == "" and config.local.token == ""
    assert len(config.server.trusted_proxies) == 3  # the containers' private networks


def test_compose_needs_a_database_password() -> None:
    with pytest.raises(ValueError, match="POSTGRES_PASSWORD"):
        compose({})


def test_the_proxy_spreads_requests_round_robin_over_healthy_replicas() -> None:
    proxy = compose({"POSTGRES_PASSWORD": "s3cret"})["services"]["proxy"]
    assert "./Caddyfile:/etc/caddy/Caddyfile:ro" in proxy["volumes"]
    assert set(proxy["depends_on"]) == set(REPLICAS)
    caddy = CADDYFILE.read_text()
    upstreams = re.search(r"reverse_proxy ([^{]+)\{", caddy)
    assert upstreams is not None
    assert upstreams.group(1).split() == [f"{name}:8787" for name in REPLICAS]
    assert re.search(r"^\s*lb_policy round_robin$", caddy, re.M)
    assert re.search(r"^\s*health_uri /healthz$", caddy, re.M)


def dotenv(text: str) -> dict[str, str]:
    """`NAME=value` lines as Compose reads an .env file (comments and blank lines skipped,
    one pair of surrounding quotes removed)."""
    found = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        found[name.strip()] = value
    return found


def replica_environment(env: dict[str, str]) -> dict[str, str]:
    environment = compose(env)["services"][REPLICAS[0]]["environment"]
    # Compose hands YAML booleans to the container as "true"/"false".
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in environment.items()}


def test_every_secret_reaches_the_replicas_from_the_env_file() -> None:
    example = dotenv(ENV_EXAMPLE.read_text())
    used = set(VARIABLE.findall(COMPOSE.read_text()))
    used_names = {name for name, _, _ in used}
    # .env.example names exactly what compose.yaml reads: nothing missing, nothing unused.
    assert set(example) == used_names
    passed = replica_environment({"POSTGRES_PASSWORD": "s3cret"})
    secrets = set(secret_variables(config_model(CHANNELS)).values()) | {
        "KRILL_TELEGRAM__WEBHOOK_SECRET",
        "KRILL_LOCAL__TOKEN",
    }
    assert secrets <= set(passed), secrets - set(passed)
    assert "KRILL_ADMIN__USERS" in passed
    # Placeholders are empty: nothing secret, and no made-up owner, ships in the example.
    assert all(value in ("", "false", "socket", "webhook") for value in example.values())
    console = ENV_EXAMPLE.read_text().split("KRILL_ADMIN_TOKEN=")[0].rsplit("\n\n", 1)[-1]
    assert "at least 24 characters" in console


async def test_the_compose_flow_opens_the_console_and_admits_the_owner(tmp_path: Path) -> None:
    """deploy/.env filled in as docs/deploying.md says, the replica environment compose builds from
    it, on the image's config: the owner is an admin of a Telegram that pairs strangers,
    and the console answers with the token (PostgreSQL swapped for SQLite here)."""
    filled = ENV_EXAMPLE.read_text()
    for name, value in {
        "POSTGRES_PASSWORD": "s3cret",
        "KRILL_ADMIN_TOKEN": CONSOLE_TOKEN,
        "KRILL_ADMIN__USERS": "'[\"telegram:12345\"]'",
        "KRILL_TELEGRAM__ENABLED": "true",
        "TELEGRAM_BOT_TOKEN": "123:abc",
        "KRILL_TELEGRAM__WEBHOOK_URL": "https://bot.example.com/telegram/webhook",
        "KRILL_TELEGRAM__WEBHOOK_SECRET": "hook-secret",
    }.items():
        filled = re.sub(rf"^{name}=.*$", f"{name}={value}", filled, flags=re.M)
    environment = replica_environment(dotenv(filled))
    shutil.copyfile(DEPLOY_CONFIG, tmp_path / "krill.toml")
    config = load_config(str(tmp_path / "krill.toml"), environment, channels=CHANNELS)
    assert config.admin.users == ["telegram:12345"]
    assert config.admin.console_token == CONSOLE_TOKEN
    assert config.telegram.dm_policy == "pairing"
    policy = config.channel_policy("telegram")
    assert policy is not None
    assert access.reach(policy, "telegram", config.admin) is access.Reach.DIRECT

    port = free_port()
    env = {
        name: value
        for name, value in environment.items()
        if name.startswith(("KRILL_ADMIN", "KRILL_LOCAL"))
    } | {"KRILL_SERVER__PORT": str(port)}
    krill = KrillProcess(tmp_path, {"server": {"port": port}}, env)
    shutil.copyfile(DEPLOY_CONFIG, krill.config_path)
    code, _, err = await run_cli(tmp_path, "init", str(tmp_path))
    assert code == 0, err
    async with krill, aiohttp.ClientSession() as http:
        bearer = {"Authorization": f"Bearer {CONSOLE_TOKEN}"}
        async with http.get(f"{krill.url}/admin", headers=bearer) as resp:
            assert resp.status == 200
            assert "Sessions" in await resp.text()
