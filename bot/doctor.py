"""`krill doctor`: check config, tokens, workspace and store, and say exactly what is wrong."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable

from bot.agent.workspace import BOOTSTRAP_FILES, bundled_workspace_dir
from bot.checks import FAIL, NETWORK_TIMEOUT, OK, WARN, Check
from bot.config import Config, load_config
from bot.errors import ConfigError
from bot.tools.mcp import check_servers
from channels.registry import CHANNELS


def check_workspace(config: Config) -> list[Check]:
    path = config.workspace_dir
    if not path.exists():
        return [
            Check(
                "workspace",
                WARN,
                f"{path} does not exist; `krill run` will create it from "
                f"the bundled template ({bundled_workspace_dir()})",
            )
        ]
    if not os.access(path, os.W_OK):
        return [Check("workspace", FAIL, f"{path} is not writable; memory notes cannot be saved")]
    missing = [name for name in BOOTSTRAP_FILES if not (path / name).is_file()]
    detail = str(path) + (
        f" (missing, skipped in the prompt: {', '.join(missing)})" if missing else ""
    )
    return [Check("workspace", OK, detail)]


async def check_store(config: Config) -> list[Check]:
    """Read-only: doctor must not create or migrate the database it is checking."""
    import sqlite3

    from bot.store.sqlite.migrations import MIGRATIONS

    path = config.sqlite_path
    if not path.exists():
        return [Check("store", OK, f"{path} does not exist yet; `krill run` will create it")]
    latest = MIGRATIONS[-1][0]
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            result = db.execute("PRAGMA integrity_check").fetchone()[0]
            version = db.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] or 0
        finally:
            db.close()
    except sqlite3.Error as exc:
        return [Check("store", FAIL, f"{path}: {type(exc).__name__}: {exc}")]
    if result != "ok":
        return [Check("store", FAIL, f"{path}: integrity check says {result}")]
    if version > latest:
        return [
            Check(
                "store",
                FAIL,
                f"{path} has schema v{version}, newer than this Krill (v{latest}); upgrade Krill",
            )
        ]
    pending = f", will migrate to v{latest} on start" if version < latest else ""
    return [Check("store", OK, f"{path} (schema v{version}{pending}, integrity ok)")]


async def check_anthropic(config: Config) -> list[Check]:
    if not config.anthropic.api_key:
        return [Check("anthropic", FAIL, "no API key: set ANTHROPIC_API_KEY or anthropic.api_key")]
    import anthropic

    client = anthropic.AsyncAnthropic(
        api_key=config.anthropic.api_key,
        base_url=config.anthropic.base_url or None,
        max_retries=0,
        timeout=NETWORK_TIMEOUT,
    )
    try:
        await client.messages.count_tokens(
            model=config.agent.model, messages=[{"role": "user", "content": "ping"}]
        )
    except anthropic.AuthenticationError:
        return [Check("anthropic", FAIL, "the API key was rejected (401)")]
    except anthropic.NotFoundError:
        return [Check("anthropic", FAIL, f"model {config.agent.model!r} was not found")]
    except Exception as exc:
        return [Check("anthropic", WARN, f"could not reach the API: {type(exc).__name__}: {exc}")]
    finally:
        await client.close()
    return [Check("anthropic", OK, f"key accepted; model {config.agent.model}")]


async def _run_checks(config: Config) -> list[Check]:
    checks = [Check("config", OK, str(config.source or "defaults (no krill.toml found)"))]
    checks += check_workspace(config)
    channel_checks = [spec.check for spec in CHANNELS if spec.check is not None]
    remote: list[Callable[[Config], Awaitable[list[Check]]]] = [
        check_store,
        check_anthropic,
        *channel_checks,
        check_servers,
    ]
    for fn in remote:
        checks += await fn(config)
    return checks


def run_doctor(config_path: str | None) -> int:
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        print(f"[FAIL] config: {exc}")
        return 1
    checks = asyncio.run(_run_checks(config))
    for check in checks:
        print(f"[{check.status}] {check.name}: {check.detail}")
    failed = [c for c in checks if c.status == FAIL]
    print("\nall good" if not failed else f"\n{len(failed)} problem(s) found")
    return 1 if failed else 0
