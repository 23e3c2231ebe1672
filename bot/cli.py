"""The `krill` command line: run the service, chat from a terminal, and inspect or fix state."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bot import __version__
from bot.config import Config, load_config
from bot.errors import ConfigError, KrillError
from bot.logs import redact, setup_logging

EXIT_CONFIG = 2

STARTER_CONFIG = """\
# Krill configuration. Every key is optional; see README.md for the full list.
[agent]
model = "claude-sonnet-4-6"

[anthropic]
# The API key comes from ANTHROPIC_API_KEY.
cache_ttl = "5m"

[workspace]
path = "workspace"

[storage]
url = "sqlite:///data/krill.db"

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


def _secrets(config: Config) -> list[str]:
    return [
        config.anthropic.api_key,
        config.telegram.token,
        config.telegram.webhook_secret,
        config.slack.bot_token,
        config.slack.app_token,
        config.slack.signing_secret,
    ]


async def _with_store(config: Config, fn: Callable[[Any], Awaitable[int]]) -> int:
    from bot.store.sqlite import SQLiteStore

    store = SQLiteStore(config.sqlite_path)
    await store.open()
    try:
        return await fn(store)
    finally:
        await store.close()


# --- commands -----------------------------------------------------------------------------


def cmd_run(config: Config, args: argparse.Namespace) -> int:
    from bot.app import run_service

    asyncio.run(run_service(config))
    return 0


def cmd_chat(config: Config, args: argparse.Namespace) -> int:
    from bot.chat import run_chat

    return asyncio.run(run_chat(config, args.name or getpass.getuser()))


def cmd_init(args: argparse.Namespace) -> int:
    from bot.agent.workspace import ensure_workspace

    target = Path(args.dir or ".").resolve()
    target.mkdir(parents=True, exist_ok=True)
    config_path = target / "krill.toml"
    if config_path.exists() and not args.force:
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
    return 0


def _session_dict(s: Any) -> dict[str, Any]:
    return {
        "session_key": s.session_key,
        "session_id": s.session_id,
        "current": s.is_current,
        "channel": s.channel,
        "model": s.model,
        "created_at": s.created_at,
        "updated_at": s.updated_at,
        "turns": s.turns,
        "errors": s.errors,
        "input_tokens": s.input_tokens,
        "output_tokens": s.output_tokens,
        "cache_read_tokens": s.cache_read_tokens,
        "cache_write_tokens": s.cache_write_tokens,
        "cache_hit_ratio": round(s.cache_hit_ratio, 4),
        "context_tokens": s.context_tokens,
        "compaction_count": s.compaction_count,
        "memory_flush_at": s.memory_flush_at,
        "memory_flush_count": s.memory_flush_count,
        "memory_flush_error": s.memory_flush_error,
        "last_model_call_at": s.last_model_call_at,
        "cost_usd": round(s.cost_usd, 6),
    }


def cmd_status(config: Config, args: argparse.Namespace) -> int:
    from bot.store.base import InboundStatus

    async def run(store: Any) -> int:
        sessions = await store.list_sessions(current_only=True)
        pending = await store.count_inbound(InboundStatus.PENDING) + await store.count_inbound(
            InboundStatus.PROCESSING
        )
        if args.json:
            print(
                json.dumps(
                    {
                        "version": __version__,
                        "model": config.agent.model,
                        "database": str(config.sqlite_path),
                        "unanswered_messages": pending,
                        "sessions": [_session_dict(s) for s in sessions],
                    },
                    indent=2,
                )
            )
            return 0
        print(f"Krill {__version__} · model {config.agent.model} · db {config.sqlite_path}")
        print(f"{len(sessions)} session(s), {pending} unanswered message(s)")
        if sessions:
            header = f"{'SESSION KEY':<48} {'TURNS':>5} {'IN':>9} {'OUT':>8} {'CACHE%':>6} "
            print(header + f"{'CTX':>8} {'COMP':>4} {'COST $':>8}")
        for s in sessions:
            print(
                f"{s.session_key:<48} {s.turns:>5} {s.input_tokens:>9} {s.output_tokens:>8} "
                f"{s.cache_hit_ratio:>6.0%} {s.context_tokens:>8} {s.compaction_count:>4} "
                f"{s.cost_usd:>8.4f}"
            )
        return 0

    return asyncio.run(_with_store(config, run))


def cmd_reset(config: Config, args: argparse.Namespace) -> int:
    from bot.sessions.keys import origin_of_key, validate_session_key

    try:
        key = validate_session_key(args.key)
    except ValueError as exc:
        print(f"krill reset: {exc}", file=sys.stderr)
        return 1

    async def run(store: Any) -> int:
        current = await store.current_session(key)
        if current is None:
            print(f"krill reset: no session with key {key}", file=sys.stderr)
            return 1
        origin = current.origin or origin_of_key(key, current.channel)
        session = await store.start_new_session(key, origin, "krill reset")
        print(f"reset {key}: new session {session.session_id} (old {current.session_id} kept)")
        return 0

    return asyncio.run(_with_store(config, run))


def cmd_sessions(config: Config, args: argparse.Namespace) -> int:
    from bot.transcript_export import entry_line, entry_record

    async def run(store: Any) -> int:
        if args.action == "list":
            for s in await store.list_sessions(current_only=not args.all):
                mark = "" if s.is_current else " (old)"
                print(f"{s.session_key}  {s.session_id}  turns={s.turns}{mark}")
            return 0
        if not args.key:
            print(f"krill sessions {args.action}: a SESSION_KEY is required", file=sys.stderr)
            return 1
        sessions = await store.sessions_for_key(args.key.strip().lower())
        if not sessions:
            print(f"krill sessions: no session with key {args.key}", file=sys.stderr)
            return 1
        if args.action == "export":
            for s in sessions:
                for e in await store.transcript(s.session_id):
                    print(json.dumps(entry_record(e), ensure_ascii=False))
            return 0
        for s in sessions:
            print(f"== session {s.session_id}{' (current)' if s.is_current else ''} ==")
            print(json.dumps(_session_dict(s), indent=2))
            for e in await store.transcript(s.session_id):
                print(entry_line(e))
        return 0

    return asyncio.run(_with_store(config, run))


def cmd_pairing(config: Config, args: argparse.Namespace) -> int:
    from bot.sessions.access import PAIRING_TTL_SECONDS, normalize_code
    from bot.store.base import PairingStatus

    async def run(store: Any) -> int:
        now = time.time()
        pending = [
            p
            for p in await store.pairing_pending(args.channel)
            if now - p.created_at < PAIRING_TTL_SECONDS
        ]
        if args.action == "list":
            for p in pending:
                print(f"{p.code}  {p.channel}:{p.user_id}  {p.user_name}")
            if not pending:
                print(f"no pending pairing requests on {args.channel}")
            return 0
        if not args.code:
            print("krill pairing approve: a CODE is required", file=sys.stderr)
            return 1
        code = normalize_code(args.code)
        match = next((p for p in pending if p.code == code), None)
        if match is None:
            print(
                f"krill pairing: no pending request with code {code} on {args.channel} "
                "(codes expire after 1 hour)",
                file=sys.stderr,
            )
            return 1
        match.status = PairingStatus.APPROVED
        await store.pairing_put(match)
        print(f"approved {args.channel}:{match.user_id} {match.user_name}".rstrip())
        return 0

    return asyncio.run(_with_store(config, run))


def cmd_memory(config: Config, args: argparse.Namespace) -> int:
    from bot.memory.cli import run_memory_command

    return asyncio.run(run_memory_command(config, args))


def cmd_doctor(args: argparse.Namespace) -> int:
    from bot.doctor import run_doctor

    return run_doctor(args.config)


# --- parser -------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="krill",
        description="Krill: a self-hosted chat-bot service for Telegram, Slack and local chat.",
    )
    parser.add_argument("--version", action="version", version=f"krill {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name != "init":
            p.add_argument(
                "--config", help="path to krill.toml (default: $KRILL_CONFIG or ./krill.toml)"
            )
        return p

    add("run", "start the service: channels, scheduler and the HTTP server")
    chat = add("chat", "chat with the agent from this terminal (stdin may be piped)")
    chat.add_argument("--name", help="your name in the session key (default: the OS user)")
    init = add("init", "write a krill.toml and copy the bundled workspace into DIR")
    init.add_argument("dir", nargs="?", metavar="DIR", help="target folder (default: .)")
    init.add_argument("--force", action="store_true", help="overwrite an existing krill.toml")
    status = add("status", "print every session's counters from the store")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    reset = add("reset", "start a new session under SESSION_KEY (the old transcript is kept)")
    reset.add_argument("key", metavar="SESSION_KEY")
    sessions = add("sessions", "list sessions, show one, or export its transcript as JSONL")
    sessions.add_argument("action", choices=["list", "show", "export"])
    sessions.add_argument("key", nargs="?", metavar="SESSION_KEY")
    sessions.add_argument("--all", action="store_true", help="list: include old sessions")
    pairing = add("pairing", "list or approve pairing requests from unknown users")
    pairing.add_argument("action", choices=["list", "approve"])
    pairing.add_argument("channel", choices=["telegram", "slack"])
    pairing.add_argument("code", nargs="?", metavar="CODE")
    memory = add("memory", "search the memory index, or rebuild it from the workspace files")
    memory.add_argument("action", choices=["search", "reindex"])
    memory.add_argument("query", nargs="*", metavar="QUERY", help="search: words to look for")
    memory.add_argument("--limit", type=int, help="search: results to show (memory.search)")
    add("doctor", "check config, tokens, workspace and store, and say what is wrong")
    for name, help_text, setup in EXTRA_COMMANDS:
        setup(add(name, help_text))
    return parser


# (name, help, parser set-up) for subcommands other modules contribute; dispatch by name.
EXTRA_COMMANDS: list[tuple[str, str, Callable[[argparse.ArgumentParser], None]]] = []
EXTRA_HANDLERS: dict[str, Callable[[Config, argparse.Namespace], int]] = {}

HANDLERS: dict[str, Callable[[Config, argparse.Namespace], int]] = {
    "run": cmd_run,
    "chat": cmd_chat,
    "status": cmd_status,
    "reset": cmd_reset,
    "sessions": cmd_sessions,
    "pairing": cmd_pairing,
    "memory": cmd_memory,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "init":
        return cmd_init(args)
    if args.command == "doctor":
        return cmd_doctor(args)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"krill: configuration error:\n{exc}", file=sys.stderr)
        return EXIT_CONFIG
    quiet = args.command != "run"
    setup_logging(_secrets(config), level="WARNING" if quiet else None)
    handler = HANDLERS.get(args.command) or EXTRA_HANDLERS[args.command]
    try:
        return handler(config, args)
    except ConfigError as exc:
        print(f"krill: configuration error:\n{exc}", file=sys.stderr)
        return EXIT_CONFIG
    except KrillError as exc:  # e.g. a platform refused a token: the message says which
        print(f"krill: {redact(str(exc), _secrets(config))}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
