"""`[telegram.timeouts]` and `[slack.timeouts]`: how long each step of one platform API call
may take, the same keys on both chat platforms."""

from __future__ import annotations

from pydantic import Field

from bot.config import Section


class PlatformTimeouts(Section):
    """How long, in seconds, each step of one Bot API or Web API call may take. A send whose
    answer does not come within `read` may still have arrived, so the outbox treats it as an
    unknown outcome, never as a failure to repeat at once (docs/channels.md, "Slow Telegram")."""

    connect: float = Field(10.0, gt=0)  # opening a connection to the API
    pool: float = Field(10.0, gt=0)  # waiting for a free connection of the client's pool
    write: float = Field(30.0, gt=0)  # sending the request (each part of an upload's body)
    read: float = Field(30.0, gt=0)  # waiting for the answer (long polls add their own wait)
