"""Session leases: one row per session key naming the process whose turn runs there and
until when. Claiming is one conditional upsert, so two processes racing for a key can never
both hold it."""

from __future__ import annotations

from typing import Protocol

from bot.store.db import Db


class LeaseStore(Protocol):
    """Session leases: one turn at a time per session key across every process. A claim is
    one atomic conditional write; an expired holder's lease may be taken over."""

    async def claim_lease(
        self, session_key: str, holder: str, until: float, now: float
    ) -> bool: ...
    async def release_lease(self, session_key: str, holder: str) -> None: ...
    async def lease_holder(self, session_key: str, now: float) -> str | None: ...
    async def lease_holders(self) -> list[str]: ...
    async def release_leases_of(self, holder: str) -> None: ...


# Taken when the key is free, already ours (a renewal) or held by a holder whose time ran
# out (it died, or stalled past its lease): the WHERE makes the conflicting update a no-op.
_CLAIM = (
    "INSERT INTO session_leases(session_key, holder, expires_at) VALUES (?, ?, ?)"
    " ON CONFLICT(session_key) DO UPDATE SET holder = excluded.holder,"
    " expires_at = excluded.expires_at"
    " WHERE session_leases.holder = excluded.holder OR session_leases.expires_at <= ?"
)


class LeaseTables:
    db: Db

    async def claim_lease(self, session_key: str, holder: str, until: float, now: float) -> bool:
        """Hold `session_key` for `holder` until `until`, if it is free, ours or expired at
        `now`; returns whether `holder` holds it now. Renewing is claiming again."""
        return await self.db.execute(_CLAIM, session_key, holder, until, now) == 1

    async def release_lease(self, session_key: str, holder: str) -> None:
        """Give `session_key` up, if `holder` still holds it."""
        await self.db.execute(
            "DELETE FROM session_leases WHERE session_key = ? AND holder = ?", session_key, holder
        )

    async def lease_holder(self, session_key: str, now: float) -> str | None:
        """Who holds `session_key` at `now` (None: nobody, or only an expired holder)."""
        holder = await self.db.fetchval(
            "SELECT holder FROM session_leases WHERE session_key = ? AND expires_at > ?",
            session_key,
            now,
        )
        return None if holder is None else str(holder)

    async def lease_holders(self) -> list[str]:
        """Every holder named on a lease row, expired or not."""
        rows = await self.db.fetch("SELECT DISTINCT holder FROM session_leases")
        return [str(row[0]) for row in rows]

    async def release_leases_of(self, holder: str) -> None:
        """Give up every lease of `holder` (a process known to be gone)."""
        await self.db.execute("DELETE FROM session_leases WHERE holder = ?", holder)
