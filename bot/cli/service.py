"""`krill run` and `krill chat`: start the service, and talk to the agent from a terminal."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import getpass
import logging
import signal

from bot.config import Config

log = logging.getLogger(__name__)


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
        # What starting built (modules, config, clients) lives as long as the process; kept
        # out of the collector's full passes, those stop stalling a turn every few dozen
        # (bench/history.py lists such spikes).
        gc.freeze()
        await stop.wait()
        log.info("shutting down")


def chat_command(config: Config, args: argparse.Namespace) -> int:
    from bot.chat import run_chat

    return asyncio.run(run_chat(config, args.name or getpass.getuser()))
