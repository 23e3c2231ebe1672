"""The `krill` command line: run the service, chat from a terminal, and inspect or fix state.

One module per group of subcommands; this one parses arguments and dispatches. It is the
entry point, so it hands the channel registry to what needs it (the config's sections,
`krill status`). Only `krill run` starts background work (scheduler, MCP servers, platform
channels).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial

from bot import __version__
from bot.cli.admin import doctor_command, memory_command, pairing_command
from bot.cli.backup import backup_command, restore_command
from bot.cli.costs import BY_CHOICES, costs_command, since_day
from bot.cli.init import init_command
from bot.cli.reminders import reminders_command
from bot.cli.schedules import schedules_command
from bot.cli.service import chat_command, run_command
from bot.cli.sessions import reset_command, sessions_command, status_command
from bot.config import Config, config_model, load_config
from bot.errors import EXIT_FIXABLE, ConfigError, KrillError
from bot.logs import log_level, redact, setup_logging
from bot.store.open_errors import url_passwords
from channels.registry import CHANNELS


def _secrets(config: Config) -> list[str]:
    """What the logs and error messages must never show: every configured secret and the
    store URL's password."""
    return [*config.secrets(), *url_passwords(config.storage.url)]


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
        if name not in ("init", "doctor"):
            p.add_argument(
                "--log-level",
                type=str.upper,
                choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                help="log lines at this level and above (default: logging.level; WARNING for "
                "commands other than run)",
            )
        return p

    add("run", "start the service: channels, scheduler and the HTTP server")
    chat = add("chat", "chat with the agent from this terminal (stdin may be piped)")
    chat.add_argument("--name", help="your name in the session key (default: the OS user)")
    init = add("init", "write a krill.toml and copy the bundled workspace into DIR")
    init.add_argument("dir", nargs="?", metavar="DIR", help="target folder (default: .)")
    init.add_argument("--force", action="store_true", help="overwrite an existing krill.toml")
    init.add_argument(
        "--owner",
        action="append",
        default=[],
        metavar="CHANNEL:ID",
        help="your chat identity, made an admin: telegram:<user id> or slack:<member id> "
        "(repeatable; asked on a terminal when left out)",
    )
    status = add("status", "print every session's counters from the store")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    reset = add("reset", "start a new session under SESSION_KEY (the old transcript is kept)")
    reset.add_argument("key", metavar="SESSION_KEY")
    sessions = add("sessions", "list sessions, show one, or export its transcript as JSONL")
    sessions.add_argument("action", choices=["list", "show", "export"])
    sessions.add_argument("key", nargs="?", metavar="SESSION_KEY")
    sessions.add_argument("--all", action="store_true", help="list: include old sessions")
    pairing = add("pairing", "list, approve or deny pairing requests from unknown users")
    pairing.add_argument("action", choices=["list", "approve", "deny"])
    pairing.add_argument(
        "channel",
        nargs="?",
        choices=config_model(CHANNELS).pairing_channels(),
        help="list: every channel if left out",
    )
    pairing.add_argument("code", nargs="?", metavar="CODE")
    memory = add("memory", "search the memory index, or rebuild it from the workspace files")
    memory.add_argument("action", choices=["search", "reindex"])
    memory.add_argument("query", nargs="*", metavar="QUERY", help="search: words to look for")
    memory.add_argument("--limit", type=int, help="search: results to show (memory.search)")
    reminders = add("reminders", "list the reminders people set (pending ones unless --all)")
    reminders.add_argument("action", choices=["list"])
    reminders.add_argument("--all", action="store_true", help="include sent and cancelled")
    reminders.add_argument("--json", action="store_true", help="machine-readable output")
    costs = add("costs", "what the model calls cost, by kind of work, person, chat or day")
    costs.add_argument("--by", choices=BY_CHOICES, default="kind", help="group by (default: kind)")
    costs.add_argument(
        "--since", type=since_day, metavar="YYYY-MM-DD", help="from this day on (agent.timezone)"
    )
    costs_format = costs.add_mutually_exclusive_group()
    costs_format.add_argument("--json", action="store_true", help="machine-readable output")
    costs_format.add_argument("--csv", action="store_true", help="comma-separated rows")
    schedules = add("schedules", "list scheduled jobs, or pause, resume or cancel one by ID")
    schedules.add_argument("action", choices=["list", "pause", "resume", "cancel"])
    schedules.add_argument("id", nargs="?", type=int, metavar="ID")
    schedules.add_argument("--all", action="store_true", help="list: include cancelled jobs")
    schedules.add_argument("--json", action="store_true", help="list: machine-readable output")
    backup = add("backup", "copy the store and the workspace into one archive at PATH")
    backup.add_argument("path", metavar="PATH", help="the archive to write (.tar.gz)")
    backup.add_argument("--force", action="store_true", help="replace an existing PATH")
    restore = add("restore", "put the store and the workspace back from a backup at PATH")
    restore.add_argument("path", metavar="PATH", help="an archive written by krill backup")
    restore.add_argument("--force", action="store_true", help="replace existing data")
    add("doctor", "check config, tokens, workspace and store, and say what is wrong")
    return parser


# Subcommands that need the configuration; `init` and `doctor` read it themselves.
SUBCOMMANDS: dict[str, Callable[[Config, argparse.Namespace], int]] = {
    "run": run_command,
    "chat": chat_command,
    "status": partial(status_command, channels=CHANNELS),
    "reset": reset_command,
    "sessions": sessions_command,
    "pairing": pairing_command,
    "memory": memory_command,
    "reminders": reminders_command,
    "costs": costs_command,
    "schedules": schedules_command,
    "backup": backup_command,
    "restore": restore_command,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "init":
        return init_command(args)
    if args.command == "doctor":
        return doctor_command(args)
    try:
        config = load_config(args.config, channels=CHANNELS)
    except ConfigError as exc:
        print(f"krill: configuration error:\n{exc}", file=sys.stderr)
        return EXIT_FIXABLE
    handler = SUBCOMMANDS[args.command]
    try:
        setup_logging(
            config.logging,
            _secrets(config),
            level=log_level(config.logging, args.log_level, quiet=args.command != "run"),
            log_file=config.resolve(config.logging.file) if config.logging.file else None,
        )
        return handler(config, args)
    except ConfigError as exc:
        print(f"krill: configuration error:\n{exc}", file=sys.stderr)
        return EXIT_FIXABLE
    except KrillError as exc:  # e.g. a port in use, a platform refused a token: it says which
        print(f"krill: {redact(str(exc), _secrets(config))}", file=sys.stderr)
        return EXIT_FIXABLE
    except KeyboardInterrupt:
        return 130
