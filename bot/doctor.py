"""`krill doctor`: check config, workspace (skills included), port, store, model, web search,
platforms and MCP servers with real calls, and say what is wrong, where the value came from
and how to fix it.

It exits non-zero whenever a check finds something that would stop or degrade the service.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

from bot.agent.pricing import DEFAULT_PRICE, unpriced_models
from bot.agent.workspace import BOOTSTRAP_FILES, bundled_workspace_dir, is_template
from bot.checks import FAIL, NETWORK_TIMEOUT, OK, WARN, Check
from bot.config import DEFAULT_PROVIDER, Config, load_config, split_model_id
from bot.config.origins import origin
from bot.errors import ConfigError
from bot.providers.checks import check_providers, count_tokens
from bot.sessions import access
from bot.skills.catalog import SkillCatalog
from bot.startup import creates_missing_workspace, nearest_existing, probe_folder
from bot.store.open_errors import (
    POSTGRES_OPEN_ERRORS,
    masked_url,
    postgres_problem,
    sqlite_damaged,
    sqlite_damaged_problem,
)
from bot.tools.mcp import check_servers
from bot.tools.search_backends import backend_for
from bot.tools.web_search import check_backend, server_definition
from channels.registry import CHANNELS


def _folder_problem(folder: Path) -> str | None:
    """Why no file can be created in `folder` (or the folder that would hold it), or None."""
    try:
        probe_folder(nearest_existing(folder))
    except OSError as exc:
        return f"{nearest_existing(folder)} is not writable ({exc.strerror or exc})"
    return None


def check_workspace(config: Config) -> list[Check]:
    path = config.workspace_dir
    where = origin(config, "workspace", "path")
    if is_template(path):
        return [
            Check(
                "workspace",
                FAIL,
                f"{path} is the bundled template, never a live workspace; change {where} "
                "(leave it out for data/workspace)",
            )
        ]
    if not path.exists():
        if not creates_missing_workspace(config):
            return [
                Check(
                    "workspace",
                    FAIL,
                    f"{path} does not exist; fix {where}, or create that folder",
                )
            ]
        problem = _folder_problem(path)
        if problem:
            return [Check("workspace", FAIL, f"cannot create {path}: {problem}; change {where}")]
        return [
            Check(
                "workspace",
                OK,
                f"{path} does not exist yet; `krill run` will create it from "
                f"the bundled template ({bundled_workspace_dir()})",
            )
        ]
    problem = _folder_problem(path)
    if problem:
        return [
            Check("workspace", FAIL, f"{problem}: memory notes cannot be saved; fix it or {where}")
        ]
    missing = [name for name in BOOTSTRAP_FILES if not (path / name).is_file()]
    detail = str(path) + (
        f" (missing, skipped in the prompt: {', '.join(missing)})" if missing else ""
    )
    return [Check("workspace", OK, detail)]


def check_access(config: Config) -> list[Check]:
    """Whether anyone could ever reach the bot on each enabled chat platform: a channel no
    one may use is a failure, one that refuses every DM (the owner's too) a warning."""
    checks = []
    for spec in CHANNELS:
        policy = config.channel_policy(spec.name)
        if policy is None or not spec.settings(config).enabled:
            continue
        found = access.reach(policy, spec.name, config.admin)
        if found is access.Reach.DIRECT:
            admins = [u for u in config.admin.users if u.startswith(f"{spec.name}:")]
            detail = f"{spec.name}: dm_policy {policy.dm_policy}" + (
                f", admins {', '.join(admins)}" if admins else ", no admin on this channel"
            )
            checks.append(Check("access", OK, detail))
            continue
        status = FAIL if found is access.Reach.NOBODY else WARN
        checks.append(Check("access", status, access.reach_advice(spec.name, policy, found)))
    return checks


def check_skills(config: Config) -> list[Check]:
    """Every skill that loads, and each SKILL.md left out, with its file and line."""
    scan = SkillCatalog(config.workspace_dir).scan()
    checks = [
        Check("skills", FAIL, f"{problem}; that skill is left out until it is fixed")
        for problem in scan.problems
    ]
    if scan.skills:
        checks.append(Check("skills", OK, ", ".join(s.name for s in scan.skills)))
    return checks


def check_port(config: Config) -> list[Check]:
    """Can `krill run` listen where it is told to (fails while another process holds it)."""
    host, port = config.server.host, config.server.port
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        with socket.socket(family, kind, proto) as sock:
            # As aiohttp binds: TIME_WAIT leftovers of an earlier run do not count.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
    except OSError as exc:
        return [
            Check(
                "port",
                FAIL,
                f"cannot listen on {host}:{port} ({exc.strerror or exc}); stop whatever uses "
                f"it (another `krill run`?) or change {origin(config, 'server', 'port')}",
            )
        ]
    return [Check("port", OK, f"{host}:{port} is free")]


async def check_store(config: Config) -> list[Check]:
    """Read-only: doctor must not create or migrate the database it is checking."""
    if config.uses_postgres:
        return await _check_postgres(config)
    import sqlite3

    from bot.store.migrations import LATEST

    path = config.sqlite_path
    problem = _folder_problem(path.parent)
    if problem:
        where = origin(config, "storage", "url")
        return [Check("store", FAIL, f"cannot write {path}: {problem}; fix it or change {where}")]
    if not path.exists():
        return [Check("store", OK, f"{path} does not exist yet; `krill run` will create it")]
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            result = db.execute("PRAGMA integrity_check").fetchone()[0]
            version = db.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] or 0
        finally:
            db.close()
    except sqlite3.Error as exc:
        if sqlite_damaged(exc):
            return [Check("store", FAIL, sqlite_damaged_problem(path, exc))]
        return [Check("store", FAIL, f"{path}: {type(exc).__name__}: {exc}")]
    if result != "ok":
        return [Check("store", FAIL, f"{path}: integrity check says {result}")]
    return [_schema_check(str(path), version, LATEST, "integrity ok")]


async def _check_postgres(config: Config) -> list[Check]:
    """Connect once (no pool, no migration) and read the schema version."""
    import asyncpg

    from bot.store.migrations import LATEST

    url = masked_url(config.storage.url)
    try:
        db = await asyncpg.connect(config.storage.url, timeout=NETWORK_TIMEOUT)
    except POSTGRES_OPEN_ERRORS as exc:
        fix = f"fix {origin(config, 'storage', 'url')}"
        return [Check("store", FAIL, postgres_problem(exc, config.storage.url, fix))]
    try:
        server = ".".join(str(n) for n in db.get_server_version()[:2])
        migrated = await db.fetchval("SELECT to_regclass('schema_version') IS NOT NULL")
        version = (
            await db.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_version")
            if migrated
            else 0
        )
    except asyncpg.PostgresError as exc:
        return [Check("store", FAIL, f"{url}: {type(exc).__name__}: {exc}")]
    finally:
        await db.close()
    return [_schema_check(url, version, LATEST, f"PostgreSQL {server}")]


def _schema_check(store: str, version: int, latest: int, note: str) -> Check:
    if version > latest:
        return Check(
            "store",
            FAIL,
            f"{store} has schema v{version}, newer than this Krill (v{latest}); upgrade Krill",
        )
    if version == 0:
        return Check("store", OK, f"{store} ({note}) is empty; `krill run` will create the schema")
    pending = f", will migrate to v{latest} on start" if version < latest else ""
    return Check("store", OK, f"{store} (schema v{version}{pending}, {note})")


async def check_prices(config: Config) -> list[Check]:
    """Costs (and so /status and the console) need a price for every model requests use."""
    unpriced = unpriced_models(config)
    if not unpriced:
        return []
    tables = ", ".join(f'[models."{m}"]' for m in unpriced)
    # With a spending cap set, `krill run` refuses to start (bot.agent.pricing.require_prices).
    capped = config.spending_capped()
    return [
        Check(
            "prices",
            FAIL if capped else WARN,
            f"no price known for {', '.join(unpriced)}: their costs are estimated at "
            f"${DEFAULT_PRICE[0]:g}/${DEFAULT_PRICE[1]:g} per million input/output tokens until "
            f"{tables} set input_usd_per_mtok and output_usd_per_mtok (0 on your own hardware)"
            + (
                "; with a spending cap set, krill run refuses to start until then" if capped else ""
            ),
        )
    ]


async def check_web_search(config: Config) -> list[Check]:
    """One test search through SearXNG or Brave, or, for the server-side search, the model
    API accepting the tool's definition (a token count: nothing is searched or billed)."""
    search = config.tools.web_search
    if not search.enabled:
        return []
    backend = backend_for(search)
    if backend is not None:
        return [await check_backend(search, backend)]
    if not config.anthropic.api_key:
        return [Check("web_search", WARN, "anthropic: not checked without an API key")]
    claude = [m for m in config.listed_models() if split_model_id(m).provider == DEFAULT_PROVIDER]
    if not claude:
        return [
            Check(
                "web_search",
                FAIL,
                "the anthropic backend searches only for Anthropic models, and no listed model "
                'is one; set tools.web_search.backend = "searxng" or "brave"',
            )
        ]
    import anthropic

    try:
        await count_tokens(
            config.provider(DEFAULT_PROVIDER), claude[0], [server_definition(search)]
        )
    except anthropic.APIStatusError as exc:
        return [
            Check(
                "web_search",
                FAIL,
                f"anthropic refused the web search tool ({exc.status_code}: {exc.message}); "
                "check tools.web_search, and that your organization allows web search",
            )
        ]
    except Exception as exc:
        return [Check("web_search", WARN, f"anthropic: not checked ({type(exc).__name__}: {exc})")]
    return [Check("web_search", OK, f"anthropic server-side search (max_uses {search.max_uses})")]


async def _run_checks(config: Config) -> list[Check]:
    checks = [Check("config", OK, str(config.source or "defaults (no krill.toml found)"))]
    checks += [Check("config", WARN, adjustment) for adjustment in config.adjustments()]
    checks += check_workspace(config)
    checks += check_skills(config)
    checks += check_access(config)
    checks += check_port(config)
    channel_checks = [
        partial(spec.check, spec.settings(config)) for spec in CHANNELS if spec.check is not None
    ]
    remote: list[Callable[[Config], Awaitable[list[Check]]]] = [
        check_store,
        check_providers,
        check_prices,
        check_web_search,
        *channel_checks,
        check_servers,
    ]
    for fn in remote:
        checks += await fn(config)
    return checks


def run_doctor(config_path: str | None) -> int:
    try:
        config = load_config(config_path, channels=CHANNELS)
    except ConfigError as exc:
        print(f"[FAIL] config: {exc}")
        return 1
    checks = asyncio.run(_run_checks(config))
    for check in checks:
        print(f"[{check.status}] {check.name}: {check.detail}")
    failed = [c for c in checks if c.status == FAIL]
    print("\nall good" if not failed else f"\n{len(failed)} problem(s) found")
    return 1 if failed else 0
