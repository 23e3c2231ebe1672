"""`krill status`, `krill reset KEY` and `krill sessions list|show|export`: what the store
holds about sessions, and starting a fresh one."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from bot import __version__
from bot.channel_contract import ChannelSpec, ChannelStatus
from bot.cli.store_access import with_store
from bot.config import Config
from bot.gateway.leader import leader_key
from bot.media.usage import data_use, disk_line
from bot.sessions.breaker import paused_until_text
from bot.sessions.window import session_limits
from bot.store.base import InboundStatus, SessionRow, Store
from bot.store.factory import store_location
from bot.store.names import name_of_session
from bot.transcript_export import entry_line, entry_record


def compaction_dict(config: Config, s: SessionRow) -> dict[str, Any]:
    """The compaction breaker and the window in use (docs/contracts.md section 14)."""
    limits = session_limits(config, s)
    return {
        "failures": s.compaction_failures,
        "paused_until": paused_until_text(s.compaction_paused_until),
        "window": limits.window,
        "window_source": str(limits.source),
    }


def session_dict(config: Config, s: SessionRow) -> dict[str, Any]:
    return {
        "session_key": s.session_key,
        "session_id": s.session_id,
        "current": s.is_current,
        "channel": s.channel,
        "model": s.model,
        "chosen_model": s.chosen_model,
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
        "compaction": compaction_dict(config, s),
    }


async def channel_statuses(
    config: Config, store: Store, channels: Sequence[ChannelSpec[Any]]
) -> dict[str, ChannelStatus]:
    """What each channel has to say beyond the store's counters (e.g. which replica polls)."""

    async def leader(name: str) -> str | None:
        return await store.lease_holder(leader_key(name), time.time())

    found = {}
    for spec in channels:
        if spec.status is not None and (said := await spec.status(spec.settings(config), leader)):
            found[spec.name] = said
    return found


def status_command(
    config: Config, args: argparse.Namespace, *, channels: Sequence[ChannelSpec[Any]]
) -> int:
    async def run(store: Store) -> int:
        sessions = await store.list_sessions(current_only=True)
        pending = await store.count_inbound(InboundStatus.PENDING) + await store.count_inbound(
            InboundStatus.PROCESSING
        )
        outbox = await store.outbox_summary()
        statuses = await channel_statuses(config, store, channels)
        disk = data_use(config)
        if args.json:
            print(
                json.dumps(
                    {
                        "version": __version__,
                        "model": config.agent.model,
                        "database": store_location(config),
                        "unanswered_messages": pending,
                        "outbox": {
                            "pending": outbox.pending,
                            "dead": outbox.dead,
                            "dead_chunks": [asdict(chunk) for chunk in outbox.dead_chunks],
                            "maybe_sent": outbox.maybe_sent,
                            "maybe_sent_chunks": [
                                asdict(chunk) for chunk in outbox.maybe_sent_chunks
                            ],
                        },
                        "disk": {use.kind: use.size for use in disk},
                        "sessions": [session_dict(config, s) for s in sessions],
                        **{name: status.fields for name, status in statuses.items()},
                    },
                    indent=2,
                )
            )
            return 0
        print(f"Krill {__version__} · model {config.agent.model} · db {store_location(config)}")
        print(f"{len(sessions)} session(s), {pending} unanswered message(s)")
        print(
            f"outbox: {outbox.pending} chunk(s) waiting, {outbox.dead} refused for good, "
            f"{outbox.maybe_sent} maybe sent (never confirmed, not sent again)"
        )
        print(disk_line(disk))
        for status in statuses.values():
            print(status.line)
        for state, chunks in (
            ("dead", outbox.dead_chunks),
            ("maybe sent", outbox.maybe_sent_chunks),
        ):
            for chunk in chunks:
                print(
                    f"  {state}: {chunk.channel}:{chunk.chat_id} part {chunk.chunk_index + 1} "
                    f"of {chunk.chunk_count} ({chunk.turn_id}): {chunk.reason}"
                )
        if sessions:
            header = f"{'SESSION KEY':<48} {'TURNS':>5} {'IN':>9} {'OUT':>8} {'CACHE%':>6} "
            print(header + f"{'CTX':>8} {'COMP':>4} {'COST $':>8}")
        for s in sessions:
            print(
                f"{s.session_key:<48} {s.turns:>5} {s.input_tokens:>9} {s.output_tokens:>8} "
                f"{s.cache_hit_ratio:>6.0%} {s.context_tokens:>8} {s.compaction_count:>4} "
                f"{s.cost_usd:>8.4f}"
            )
        for s in sessions:
            if s.compaction_failures:
                until = paused_until_text(s.compaction_paused_until) or "not paused"
                print(
                    f"  compaction of {s.session_key}: {s.compaction_failures} failure(s) "
                    f"in a row, paused until {until}"
                )
        return 0

    return asyncio.run(with_store(config, run))


def reset_command(config: Config, args: argparse.Namespace) -> int:
    """Start a new session under the key, after the same memory flush `/reset` runs."""
    from bot.sessions.keys import validate_session_key

    try:
        key = validate_session_key(args.key)
    except ValueError as exc:
        print(f"krill reset: {exc}", file=sys.stderr)
        return 1
    return asyncio.run(_reset(config, key))


async def _reset(config: Config, key: str) -> int:
    from bot.app import App
    from bot.sessions.keys import conversation_of_key

    async with App(config, with_server=False, recover=False) as app:
        current = await app.store.current_session(key)
        if current is None:
            print(f"krill reset: no session with key {key}", file=sys.stderr)
            return 1
        origin = current.origin or conversation_of_key(key, current.channel)
        session = await app.gateway.commands.reset(key, origin, reason="krill reset")
    print(f"reset {key}: new session {session.session_id} (old {current.session_id} kept)")
    return 0


def sessions_command(config: Config, args: argparse.Namespace) -> int:
    async def run(store: Store) -> int:
        if args.action == "list":
            names = await store.names_all()
            for s in await store.list_sessions(current_only=not args.all):
                mark = "" if s.is_current else " (old)"
                # Quoted as JSON: a name is the platform's text, control characters included.
                name = name_of_session(names, s.origin)
                named = f"  {json.dumps(name, ensure_ascii=False)}" if name else ""
                print(f"{s.session_key}  {s.session_id}  turns={s.turns}{mark}{named}")
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
            print(json.dumps(session_dict(config, s), indent=2))
            for e in await store.transcript(s.session_id):
                print(entry_line(e))
        return 0

    return asyncio.run(with_store(config, run))
