"""A tiny MCP server for tests, built with the official `mcp` SDK.

Run it as a subprocess: `python tests/fakes/mcp_server.py` serves stdio;
`--http PORT` serves streamable HTTP at `/mcp`; `--hang` never answers, to test start
timeouts; `--print-env` first writes its environment to stderr, as careless servers do.
Tools: `echo`, `big` (large output), `fail` (an error result), `slow`, and
`crash` (the process exits mid-call).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer

SCRIPT = Path(__file__).resolve()
CRASH_EXIT_CODE = 3

server = MCPServer("fake-mcp")


@server.tool()
def echo(text: str) -> str:
    """Return the text it was given."""
    return f"echo: {text}"


@server.tool()
def big(kb: int = 200) -> str:
    """Return about `kb` kilobytes of numbered lines."""
    lines: list[str] = []
    size = 0
    while size < kb * 1000:
        line = f"line {len(lines) + 1:06d} " + "x" * 40
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


@server.tool()
def fail(reason: str = "it broke") -> str:
    """Fail with an error result."""
    raise ValueError(reason)


@server.tool()
async def slow(seconds: float = 5.0) -> str:
    """Sleep, then answer (cancellable, so a client timeout ends it)."""
    await anyio.sleep(seconds)
    return "done"


@server.tool()
def crash() -> str:
    """Take the whole server process down."""
    os._exit(CRASH_EXIT_CODE)


def stdio_command(*extra: str) -> list[str]:
    """`[command, *args]` that starts this server over stdio with the current interpreter."""
    return [sys.executable, str(SCRIPT), *extra]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--http", type=int, default=0, help="serve streamable HTTP on this port")
    parser.add_argument("--hang", action="store_true", help="never answer anything")
    parser.add_argument("--print-env", action="store_true", help="write the environment to stderr")
    args = parser.parse_args()
    if args.print_env:
        for name, value in sorted(os.environ.items()):
            print(f"{name}={value}", file=sys.stderr, flush=True)
    if args.hang:
        while True:
            time.sleep(3600)
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run()


if __name__ == "__main__":
    main()
