"""`krill chat`: the agent in this terminal, one DM session for the OS user.

Replies stream to stdout; log lines go to stderr (or `logging.file`) at WARNING unless the
operator asks for more. With piped stdin each line is one message and only replies are
printed, so a conversation can be scripted. Ctrl-C ends it at once, and like /stop drops the
message being answered: the next chat does not answer it again.
"""

from __future__ import annotations

import asyncio
import sys
import threading

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
    key = session_key(local_message(name, ""), config.session)
    try:
        async with app:  # a failed start still closes what it opened
            if interactive:
                print(
                    f"Krill chat as {name} (session {key}). /help lists commands; "
                    "Ctrl-D or Ctrl-C quits."
                )
            if not app.model.configured:
                print(
                    "warning: ANTHROPIC_API_KEY is not set; replies will say so.", file=sys.stderr
                )
            lines = _stdin_lines()
            while True:
                if interactive:
                    print("\nyou> ", end="", flush=True)
                line = await lines.get()
                if line is None:
                    break
                text = line.rstrip("\n")
                if not text.strip():
                    continue
                msg = local_message(name, text)
                try:
                    await app.gateway.accept(msg)
                    await app.gateway.wait_idle(msg)
                except asyncio.CancelledError:
                    # Left unanswered, the next chat (or `krill run`) would answer it.
                    await app.gateway.commands.stop(key)
                    raise
    except asyncio.CancelledError:  # Ctrl-C: end the prompt's line before the shell's
        if interactive:
            print()
        raise
    return 0


def _stdin_lines() -> asyncio.Queue[str | None]:
    """Lines typed or piped on stdin, then None at its end.

    A daemon thread reads them: a blocking read in the loop's executor would make Ctrl-C
    wait for Enter, because `asyncio.run` joins that executor before it returns.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def read() -> None:
        try:
            for line in sys.stdin:
                loop.call_soon_threadsafe(queue.put_nowait, line)
            loop.call_soon_threadsafe(queue.put_nowait, None)
        except RuntimeError:  # the chat ended (Ctrl-C) and closed its loop meanwhile
            return

    threading.Thread(target=read, name="stdin", daemon=True).start()
    return queue
