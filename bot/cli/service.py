"""`krill run`, `krill chat` and `krill init`: start the service, talk to the agent from a
terminal, and set up a new folder."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import logging
import signal
import sys
from pathlib import Path

from bot.config import Config
from bot.errors import EXIT_FIXABLE

log = logging.getLogger(__name__)

STARTER_CONFIG = """\
# Krill configuration. Every key is optional; see README.md for the full list.
[agent]
model = "claude-sonnet-4-6"
timezone = "UTC"   # reminders, daily notes and [session.reset] at read times here
# models = ["claude-sonnet-4-6", "claude-haiku-4-5"]   # what /model may switch a session to

# [session.reset]   # start fresh sessions on their own (the old one is flushed and summarized)
# mode = "idle"     # off | idle | daily
# idle_after = "24h"

[anthropic]
# The API key comes from ANTHROPIC_API_KEY.
cache_ttl = "5m"

[workspace]
path = "workspace"

[storage]
url = "sqlite:///data/krill.db"
# url = "postgresql://krill:secret@db.internal:5432/krill"   # several replicas share one PostgreSQL

[server]
host = "127.0.0.1"
port = 8787

[admin]
users = []   # e.g. ["telegram:12345", "slack:U0123ABC"]

[telegram]
enabled = false   # token from TELEGRAM_BOT_TOKEN

[slack]
enabled = false   # tokens from SLACK_BOT_TOKEN, SLACK_APP_TOKEN, SLACK_SIGNING_SECRET
"""


def run_command(config: Config, args: argparse.Namespace) -> int:
    asyncio.run(run_service(config))
    return 0


async def run_service(config: Config) -> None:
    from bot.app import App
    from bot.scheduler.jobs import service_clock

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):  # no signal handlers on Windows
            loop.add_signal_handler(sig, stop.set)
    async with App(config, background=True, clock=service_clock(config.scheduler)):
        await stop.wait()
        log.info("shutting down")


def chat_command(config: Config, args: argparse.Namespace) -> int:
    from bot.chat import run_chat

    return asyncio.run(run_chat(config, args.name or getpass.getuser()))


def init_command(args: argparse.Namespace) -> int:
    target = Path(args.dir or ".").resolve()
    if target.exists() and not target.is_dir():
        print(f"krill init: {target} is a file; give a folder (new or existing)", file=sys.stderr)
        return EXIT_FIXABLE
    try:
        _init(target, force=args.force)
    except OSError as exc:
        where = exc.filename or target
        print(
            f"krill init: cannot write {where} ({exc.strerror or exc}); choose a folder you "
            "can write to, or fix its permissions",
            file=sys.stderr,
        )
        return EXIT_FIXABLE
    return 0


def _init(target: Path, *, force: bool) -> None:
    from bot.agent.workspace import ensure_workspace

    target.mkdir(parents=True, exist_ok=True)
    config_path = target / "krill.toml"
    if config_path.exists() and not force:
        print(f"{config_path} already exists (use --force to overwrite)")
    else:
        config_path.write_text(STARTER_CONFIG, encoding="utf-8")
        print(f"wrote {config_path}")
    workspace = target / "workspace"
    if ensure_workspace(workspace):
        print(f"copied the bundled workspace to {workspace}")
    else:
        print(f"{workspace} already exists; left as it is")
    print(f"next: export ANTHROPIC_API_KEY=... && krill run --config {config_path}")
