"""PostgreSQL connection details and the few client calls the runtime needs (psycopg 3).

The one module that imports psycopg (a dev dependency: it is imported when first used).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

from cdc.errors import SetupError

if TYPE_CHECKING:
    import psycopg


@dataclass(frozen=True)
class PgEndpoint:
    """The parts of a ``postgresql://user:password@host:port/dbname`` DSN."""

    host: str
    port: int
    user: str
    password: str
    dbname: str

    @classmethod
    def from_dsn(cls, dsn: str) -> PgEndpoint:
        """Split a URI DSN; key=value DSNs are not accepted."""
        url = urlsplit(dsn)
        if url.scheme not in ("postgresql", "postgres") or not url.hostname or not url.username:
            raise SetupError(
                f"the DSN ({url.scheme or 'no scheme'}) is not a PostgreSQL URI: "
                "write postgresql://user:password@host:port/db"
            )
        return cls(
            host=url.hostname,
            port=url.port or 5432,
            user=unquote(url.username),
            password=unquote(url.password or ""),
            dbname=unquote(url.path.lstrip("/")) or unquote(url.username),
        )

    @property
    def dsn(self) -> str:
        auth = f"{quote(self.user, safe='')}:{quote(self.password, safe='')}"
        return f"postgresql://{auth}@{self.host}:{self.port}/{quote(self.dbname, safe='')}"


def connect(dsn: str, *, autocommit: bool = True) -> psycopg.Connection[Any]:
    """A psycopg 3 connection to ``dsn`` (autocommit unless told otherwise)."""
    try:
        import psycopg
    except ImportError as exc:
        raise SetupError(
            "psycopg is not installed: pip install 'psycopg[binary]' (it is in the dev extra)"
        ) from exc
    try:
        return psycopg.connect(dsn, autocommit=autocommit, connect_timeout=10)
    except psycopg.OperationalError as exc:
        where = PgEndpoint.from_dsn(dsn)
        reason = " ".join(str(exc).split())[:300]
        raise SetupError(
            f"cannot connect to PostgreSQL {where.dbname} at {where.host}:{where.port} as "
            f"{where.user} ({reason}): start the server or fix the DSN"
        ) from exc


def emit_logical_message(dsn: str, prefix: str, content: str) -> int:
    """Write a non-transactional logical decoding message and return its LSN as an integer.

    Logical decoding emits it after every transaction that committed before it, so a reader that
    sees it has seen all of them.
    """
    with connect(dsn) as conn:
        row = conn.execute(
            "SELECT (pg_logical_emit_message(false, %s, %s) - '0/0'::pg_lsn)::bigint",
            (prefix, content),
        ).fetchone()
    assert row is not None
    return int(row[0])


def current_wal_lsn(dsn: str) -> int:
    """``pg_current_wal_lsn()`` as an integer (the unit of Debezium's ``source.lsn``)."""
    with connect(dsn) as conn:
        row = conn.execute("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint").fetchone()
    assert row is not None
    return int(row[0])
