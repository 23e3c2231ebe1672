"""`krill reminders list`: every reminder in the store, for the operator on the host."""

from __future__ import annotations

import argparse
import asyncio
import json

from bot.cli.store_access import with_store
from bot.config import Config
from bot.scheduler.when import describe_time
from bot.store.base import ReminderStatus, Store


def reminders_command(config: Config, args: argparse.Namespace) -> int:
    async def run(store: Store) -> int:
        status = None if args.all else ReminderStatus.PENDING
        rows = await store.reminders(status=status)
        if args.json:
            print(
                json.dumps(
                    [
                        {
                            "id": r.id,
                            "status": r.status,
                            "due_at": r.due_at,
                            "session_key": r.session_key,
                            "creator": r.creator,
                            "text": r.text,
                        }
                        for r in rows
                    ],
                    ensure_ascii=False,
                )
            )
            return 0
        if not rows:
            print("No pending reminders." if status else "No reminders.")
            return 0
        tz = config.agent.timezone
        for r in rows:
            state = "" if status else f" [{r.status}]"
            print(f"#{r.id}{state}  {describe_time(r.due_at, tz)}  {r.creator}  {r.session_key}")
            print(f"    {r.text}")
        return 0

    return asyncio.run(with_store(config, run))
