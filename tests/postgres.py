"""A throwaway PostgreSQL server for the tests and benchmarks, and the store fixtures.

One cluster per test session, started from the server binaries (Debian's postgresql
package: /usr/lib/postgresql/<version>/bin) in a temporary folder on a free loopback port;
each test gets a fresh database. As root the server runs as the `postgres` user, because
`initdb` refuses to run as root. The server is tuned for tests (no fsync): it holds nothing
worth keeping.

`scripts/test-deps.sh` installs the server when it is missing, so a machine that ran
README's test command has it; anywhere else the PostgreSQL tests are skipped with a reason
that says how to get it.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.store.base import Store
from bot.store.postgres import PostgresStore
from bot.store.sqlite import SQLiteStore

SERVER_USER = "postgres"  # who runs the server when the tests run as root
ROLE = "krill"
# The one role the server asks for a password (every other login is trusted), for tests
# of a refused password; tests create it with the password they need.
PASSWORD_ROLE = "krill_pw"
MISSING = (
    "PostgreSQL server binaries not found (initdb, pg_ctl): install Debian's `postgresql` "
    "package (bash scripts/test-deps.sh does), or set KRILL_PG_BIN to their folder"
)


def find_bin_dir() -> Path | None:
    """The folder holding initdb and pg_ctl: $KRILL_PG_BIN, the newest Debian install, or
    PATH."""
    if env := os.environ.get("KRILL_PG_BIN"):
        return Path(env)
    installed = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if installed:
        return installed[-1].parent
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresCluster:
    """initdb + pg_ctl start in a temporary folder; `stop` removes it all."""

    def __init__(self, bin_dir: Path):
        self.bin_dir = bin_dir
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="krill-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._names = itertools.count(1)
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            entry = pwd.getpwnam(SERVER_USER)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
            self._as_user = [
                "setpriv",
                f"--reuid={entry.pw_uid}",
                f"--regid={entry.pw_gid}",
                "--init-groups",
            ]

    def _run(self, tool: str, *args: str) -> None:
        command = [*self._as_user, str(self.bin_dir / tool), *args]
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.root)
        if done.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"{tool} failed: {done.stderr or done.stdout}\n{log}")

    def start(self) -> PostgresCluster:
        self._run("initdb", "-D", str(self.data), "-U", ROLE, "--auth=trust", "-E", "UTF8")
        hba = self.data / "pg_hba.conf"
        password_line = f"host all {PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256\n"
        hba.write_text(password_line + hba.read_text())  # the first matching line wins
        options = " ".join(
            [
                f"-p {self.port}",
                "-c listen_addresses=127.0.0.1",
                f"-c unix_socket_directories={self.root}",
                "-c fsync=off",
                "-c synchronous_commit=off",
                "-c full_page_writes=off",
                "-c max_connections=300",
            ]
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")
        return self

    def stop(self) -> None:
        if self.data.exists():
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
            except RuntimeError:
                pass  # already stopped; the folder goes anyway
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str) -> str:
        return f"postgresql://{ROLE}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        name = f"krill_test_{next(self._names)}"
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", ROLE, name)
        return self.url(name)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PostgresCluster]:
    bin_dir = find_bin_dir()
    if bin_dir is None or not (bin_dir / "pg_ctl").exists():
        pytest.skip(MISSING)
    cluster = PostgresCluster(bin_dir).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def pg_url(pg_cluster: PostgresCluster) -> str:
    """The URL of a fresh database on the test session's server."""
    return pg_cluster.new_database()


@pytest.fixture
async def pg_store(pg_url: str) -> AsyncIterator[PostgresStore]:
    store = PostgresStore(pg_url, busy_wait=5.0, connect_wait=5.0)
    await store.open()
    yield store
    await store.close()


@pytest.fixture(params=["sqlite", "postgres"])
async def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """An opened store of each kind: the store contract holds for both."""
    store: Store
    if request.param == "sqlite":
        store = SQLiteStore(tmp_path / "db" / "krill.db")
    else:
        url = request.getfixturevalue("pg_url")
        store = PostgresStore(url, busy_wait=5.0, connect_wait=5.0)
    await store.open()
    yield store
    await store.close()
