"""What a person reads when the store will not open: `storage.url` with its password
masked however it was written, and the driver's exception turned into one line that says
what is wrong and what to change. Pure functions: the caller adds where the setting lives.
"""

from __future__ import annotations

import re
import sqlite3
from urllib.parse import urlsplit

import asyncpg

MASK = "***"
# `password=` (and `sslpassword=`…) in a URL's query, up to the next parameter.
_QUERY_PASSWORD = re.compile(r"([?&][^=&#]*password=)[^&]*", re.IGNORECASE)
# What a URL that asyncpg cannot even parse raises (a port that is not a number, or out of
# range, a bad query option).
_UNREADABLE = (ValueError, OverflowError, UnicodeError)
# Everything opening the PostgreSQL store raises for a reason outside Krill's code.
POSTGRES_OPEN_ERRORS: tuple[type[Exception], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    OSError,
    TimeoutError,
    *_UNREADABLE,
)
# "file is not a database" and "database disk image is malformed".
_DAMAGED_CODES = frozenset({sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT})
ENCODING_HINT = (
    "characters such as @ # / ? in the password must be percent-encoded (%40 %23 %2F %3F)"
)


def _split_userinfo(url: str) -> tuple[str, str, str] | None:
    """(scheme + "://" + user, password, the rest from the "@" before the host on), or None
    when the URL names no password there. The password runs to the last "@", so one
    written unencoded ("p@s#s/w") is still all of it."""
    scheme, sep, rest = url.partition("://")
    at = rest.rfind("@")
    if not sep or at < 0:
        return None
    user, colon, password = rest[:at].partition(":")
    if not colon:
        return None
    return f"{scheme}://{user}", password, rest[at:]


def masked_url(url: str) -> str:
    """`url` with every password in it (user info and query) replaced by ***."""
    parts = _split_userinfo(url)
    if parts is not None:
        head, _, tail = parts
        url = f"{head}:{MASK}{tail}"
    return _QUERY_PASSWORD.sub(lambda m: m.group(1) + MASK, url)


def url_passwords(url: str) -> list[str]:
    """The passwords written in `url`, as written (for redacting them anywhere else)."""
    found = [m.group(0).split("=", 1)[1] for m in _QUERY_PASSWORD.finditer(url)]
    parts = _split_userinfo(url)
    if parts is not None:
        found.append(parts[1])
    return [p for p in found if p]


def encoding_hint(url: str) -> str:
    """A hint to append when a parser would take part of the password for the host: an "@"
    follows the one that `urlsplit` ends the user info at (a "#", "/" or "?" came first)."""
    netloc = urlsplit(url).netloc
    _, sep, rest = url.partition("://")
    if sep and rest.rfind("@") >= len(netloc):
        return f"; {ENCODING_HINT}"
    return ""


def _redacted(text: str, url: str) -> str:
    for password in url_passwords(url):
        text = text.replace(password, MASK)
    return text


# What the server said no to, and what to do about it, by the driver's exception; each
# template is completed with the masked URL, what the server said, and where to fix it.
_REFUSALS: tuple[tuple[type[Exception] | tuple[type[Exception], ...], str], ...] = (
    (asyncpg.InvalidPasswordError, "the server at {where} refused the password ({said}); {fix}"),
    (
        asyncpg.InvalidAuthorizationSpecificationError,
        "the server at {where} refused the login ({said}); check the user name and the "
        "server's pg_hba.conf, or {fix}",
    ),
    (
        asyncpg.InvalidCatalogNameError,
        "{said} on the server at {where}; create it (createdb), or {fix}",
    ),
    (
        asyncpg.InsufficientPrivilegeError,
        "the user in {where} may not create Krill's tables ({said}); make it the database's "
        "owner, or {fix}",
    ),
    (
        _UNREADABLE,
        "{where} cannot be read ({said}); {fix}: postgresql://USER:PASSWORD@HOST:PORT/DATABASE,"
        " a port from 1 to 65535, and " + ENCODING_HINT,
    ),
    (
        (OSError, TimeoutError),
        "cannot reach the database at {where} ({kind}: {said}); start the PostgreSQL server, "
        "or {fix}{hint}",
    ),
)


def postgres_problem(exc: BaseException, url: str, fix: str) -> str:
    """One line: why the PostgreSQL server at `url` could not be used, and what to do;
    `fix` says where to change the URL (e.g. "fix storage.url in /srv/krill.toml")."""
    facts = {
        "where": masked_url(url),
        "said": _redacted(str(exc) or type(exc).__name__, url),
        "kind": type(exc).__name__,
        "fix": fix,
        "hint": encoding_hint(url),
    }
    for kinds, template in _REFUSALS:
        if isinstance(exc, kinds):
            return template.format(**facts)
    return "the database at {where} could not be opened ({kind}: {said}); {fix}".format(**facts)


def sqlite_damaged(exc: BaseException) -> bool:
    """Whether opening the SQLite file failed because the file is not a sound database."""
    return isinstance(exc, sqlite3.DatabaseError) and (
        getattr(exc, "sqlite_errorcode", None) in _DAMAGED_CODES
    )


def sqlite_damaged_problem(path: object, exc: BaseException) -> str:
    """One line for a file that is not a sound SQLite database: what it is, and how to get
    the store back."""
    return (
        f"{path} is not a SQLite database, or a damaged one ({exc}); stop every Krill "
        "using it, then put back your latest backup with `krill restore PATH --force` "
        "(PATH: an archive `krill backup` wrote), or move the file aside to start with an "
        "empty store"
    )
