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

# The channels whose DM policy may be "pairing".
PAIRING_CHANNELS = ("telegram", "slack")


def pairing_command(config: Config, args: argparse.Namespace) -> int:
    from bot.sessions.access import PAIRING_TTL_SECONDS, normalize_code
    from bot.store.base import PairingStatus

    async def run(store: Store) -> int:
        now = time.time()
        pending = [
            p
            for channel in ([args.channel] if args.channel else PAIRING_CHANNELS)
            for p in await store.pairing_pending(channel)
            if now - p.created_at < PAIRING_TTL_SECONDS
        ]
        if args.action == "list":
            for p in pending:
                minutes = max(1, int(PAIRING_TTL_SECONDS - (now - p.created_at)) // 60)
                print(f"{p.code}  {p.channel}:{p.user_id}  {p.user_name}  ({minutes} min left)")
            if not pending:
                print(f"no pending pairing requests on {args.channel or 'any channel'}")
            return 0
        if not args.channel or not args.code:
            print(f"krill pairing {args.action}: CHANNEL and CODE are required", file=sys.stderr)
            return 1
        code = normalize_code(args.code)
        match = next((p for p in pending if p.code == code), None)
        if match is None:
            print(
                f"krill pairing: no pending request with code {code} on {args.channel} "
                "(codes expire after 1 hour; `krill pairing list` shows the pending ones)",
                file=sys.stderr,
            )
            return 1
        if args.action == "approve":
            match.status = PairingStatus.APPROVED
        else:
            # Kept as denied for the pairing TTL, so the person cannot ask again at once.
            match.status, match.created_at = PairingStatus.DENIED, now
        await store.pairing_put(match)
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
