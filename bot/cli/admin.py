"""`krill pairing`, `krill memory` and `krill doctor`: listing, approving and denying
people who asked to pair, the memory index from the shell, and checking a set-up."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from bot.cli.store_access import with_store
from bot.config import Config
from bot.store.base import Store


def pairing_command(config: Config, args: argparse.Namespace) -> int:
    from bot.pairings import decide_pairing, minutes_left, pending_pairings
    from bot.sessions.access import normalize_code

    async def run(store: Store) -> int:
        now = time.time()
        if args.action == "list":
            channels = [args.channel] if args.channel else config.pairing_channels()
            pending = await pending_pairings(store, channels, now)
            for p in pending:
                left = minutes_left(p, now)
                print(f"{p.code}  {p.channel}:{p.user_id}  {p.user_name}  ({left} min left)")
            if not pending:
                print(f"no pending pairing requests on {args.channel or 'any channel'}")
            return 0
        if not args.channel or not args.code:
            print(f"krill pairing {args.action}: CHANNEL and CODE are required", file=sys.stderr)
            return 1
        match = await decide_pairing(
            store, args.channel, args.code, approve=args.action == "approve", now=now
        )
        if match is None:
            print(
                f"krill pairing: no pending request with code {normalize_code(args.code)} on "
                f"{args.channel} (codes expire after 1 hour; `krill pairing list` shows the "
                "pending ones)",
                file=sys.stderr,
            )
            return 1
        print(f"{match.status} {args.channel}:{match.user_id} {match.user_name}".rstrip())
        return 0

    return asyncio.run(with_store(config, run))


def memory_command(config: Config, args: argparse.Namespace) -> int:
    from bot.cli.progress import TerminalProgress
    from bot.memory.cli import run_memory_command

    progress = TerminalProgress("reindexing memory")
    try:
        return asyncio.run(run_memory_command(config, args, progress))
    finally:
        progress.finish()


def doctor_command(args: argparse.Namespace) -> int:
    from bot.doctor import run_doctor

    return run_doctor(args.config)
