"""`krill chat`: the agent in this terminal, one DM session for the OS user.

Replies stream to stdout. With piped stdin each line is one message and only replies are
printed, so a conversation can be scripted.
"""

from __future__ import annotations

import asyncio
import sys

from bot.app import App
from bot.config import Config
from bot.sessions.keys import session_key


async def run_chat(config: Config, name: str) -> int:
    from channels.local.terminal import TerminalChannel
    from channels.local.web import local_message

    # `krill run` may be serving the same database: leave unanswered messages and all
    # background work (scheduler, MCP servers) to it.
    app = App(config, with_server=False, recover=False)
    app.add_channel(TerminalChannel())
    interactive = sys.stdin.isatty()
    loop = asyncio.get_running_loop()
    try:
        await app.start()  # inside the try: a failed start still closes what it opened
        if interactive:
            key = session_key(local_message(name, ""), config.session)
            print(f"Krill chat as {name} (session {key}). /help lists commands; Ctrl-D quits.")
        if not app.model.configured:
            print("warning: ANTHROPIC_API_KEY is not set; replies will say so.", file=sys.stderr)
        while True:
            if interactive:
                print("\nyou> ", end="", flush=True)
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                break
            text = line.rstrip("\n")
            if not text.strip():
                continue
            msg = local_message(name, text)
            await app.gateway.accept(msg)
            await app.gateway.wait_idle(msg)
    finally:
        await app.stop()
    return 0
