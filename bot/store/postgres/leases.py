"""Session leases in PostgreSQL: one row per session key naming the replica whose turn runs
there and until when. Claiming is one conditional upsert (INSERT … ON CONFLICT … WHERE), so
two replicas racing for a key can never both hold it."""

from __future__ import annotations

from bot.store.postgres.connection import Connection

# Taken when the key is free, already ours (a renewal) or held by a holder whose time ran
# out; otherwise the conflicting update is skipped and nothing is returned.
_CLAIM = (
    "INSERT INTO session_leases AS lease(session_key, holder, expires_at) VALUES ($1, $2, $3)"
    " ON CONFLICT (session_key) DO UPDATE SET holder = EXCLUDED.holder,"
    " expires_at = EXCLUDED.expires_at"
    " WHERE lease.holder = EXCLUDED.holder OR lease.expires_at <= $4 RETURNING holder"
)


class LeaseTables(Connection):
    async def claim_lease(self, session_key: str, holder: str, until: float, now: float) -> bool:
        # A row comes back only when the insert or the conditional update happened.
        return await self._fetchval(_CLAIM, session_key, holder, until, now) is not None

    async def release_lease(self, session_key: str, holder: str) -> None:
        await self._execute(
            "DELETE FROM session_leases WHERE session_key = $1 AND holder = $2", session_key, holder
        )

    async def lease_holder(self, session_key: str, now: float) -> str | None:
        return await self._fetchval(
            "SELECT holder FROM session_leases WHERE session_key = $1 AND expires_at > $2",
            session_key,
            now,
        )

    async def lease_holders(self) -> list[str]:
        rows = await self._fetchall("SELECT DISTINCT holder FROM session_leases")
        return [str(row[0]) for row in rows]

    async def release_leases_of(self, holder: str) -> None:
        await self._execute("DELETE FROM session_leases WHERE holder = $1", holder)
