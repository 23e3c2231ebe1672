"""`krill run` and `krill chat`: start the service, and talk to the agent from a terminal."""

from __future__ import annotations

import argparse
import asyncio
import getpass

from bot.config import Config


def run_command(config: Config, args: argparse.Namespace) -> int:
    from bot.app import run_service

    asyncio.run(run_service(config))
    return 0


def chat_command(config: Config, args: argparse.Namespace) -> int:
    from bot.chat import run_chat

    return asyncio.run(run_chat(config, args.name or getpass.getuser()))
