"""A throwaway PostgreSQL cluster on 127.0.0.1 with logical replication, from Debian's packages.

``initdb`` makes the cluster in ``<data_dir>/pgdata`` on first start; the server logs to
``<data_dir>/pgdata/server.log``. As root the server runs as the unprivileged ``postgres`` user
that Debian's package creates. A login role with ``REPLICATION`` (default ``cdc``) owns the
database, so a Debezium connector can create its slot and publication. ``fsync`` is off: the
cluster is for tests and demos, fed to :mod:`cdc.runtime.debezium_capture`; connect with
:mod:`cdc.runtime.pg_client`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from cdc.errors import SetupError
from cdc.runtime.broker import free_port
from cdc.runtime.pg_client import PgEndpoint, connect
from cdc.runtime.service import LocalService

PG_ROOT = Path("/usr/lib/postgresql")
_BINARIES = ("initdb", "pg_ctl", "postgres", "pg_isready")
_INSTALL = "install Debian's PostgreSQL (apt-get install postgresql or make venv)"
_SETTINGS = """\
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = ''
wal_level = logical
max_replication_slots = 16
max_wal_senders = 16
fsync = off
log_min_messages = warning
"""


def find_bin_dir() -> Path:
    """The ``bin`` directory of the newest Debian PostgreSQL (``$REPLICATOR_PG_BIN`` first)."""
    if env := os.environ.get("REPLICATOR_PG_BIN"):
        candidates = [Path(env)]
    else:
        versions = sorted(
            (p for p in PG_ROOT.glob("*/bin") if p.parent.name.isdigit()),
            key=lambda p: int(p.parent.name),
            reverse=True,
        )
        candidates = versions
    for bin_dir in candidates:
        if all((bin_dir / name).is_file() for name in _BINARIES):
            return bin_dir
    where = env or f"{PG_ROOT}/*/bin"
    raise SetupError(
        f"PostgreSQL server binaries ({', '.join(_BINARIES)}) not found in {where}: {_INSTALL}"
    )


class LocalPostgres(LocalService):
    """Initialises, starts and stops one cluster; ``dsn`` is valid after :meth:`start`.

    Without ``data_dir`` the cluster lives in a new directory under the system temp dir, removed
    when the context manager exits.
    """

    def __init__(
        self,
        data_dir: Path | None = None,
        port: int = 0,
        user: str = "cdc",
        password: str = "cdc",
        database: str = "cdc",
        os_user: str = "postgres",
    ) -> None:
        self._temporary = data_dir is None
        if data_dir is None:
            data_dir = Path(tempfile.mkdtemp(prefix="cdc-postgres-"))
            data_dir.chmod(0o755)  # mkdtemp's 0700 would keep the server's user out
        self.data_dir = data_dir.resolve()
        self.pgdata = self.data_dir / "pgdata"
        self.log_file = self.pgdata / "server.log"
        self.port = port
        self.endpoint = PgEndpoint("127.0.0.1", port, user, password, database)
        self.os_user = os_user if os.geteuid() == 0 else None
        self._running = False

    @property
    def dsn(self) -> str:
        """The DSN of the replication-capable owner of the database."""
        return self.endpoint.dsn

    @property
    def superuser_dsn(self) -> str:
        """The DSN of the cluster's superuser ``postgres`` (same password), database postgres."""
        return PgEndpoint(
            "127.0.0.1", self.port, "postgres", self.endpoint.password, "postgres"
        ).dsn

    def create_database(self, name: str) -> str:
        """Create a database owned by the replication user; its DSN."""
        with connect(self.superuser_dsn) as conn:
            conn.execute(f"CREATE DATABASE {_ident(name)} OWNER {_ident(self.endpoint.user)}")
        user, password, _ = self._names()
        return PgEndpoint("127.0.0.1", self.port, user, password, name).dsn

    def start(self, timeout_s: float = 60.0) -> str:
        """``initdb`` if new, start the server, wait until it accepts connections; the DSN."""
        bin_dir = find_bin_dir()
        if self.port and not self._running and _port_in_use(self.port):
            raise SetupError(
                f"port {self.port} on 127.0.0.1 is already in use: stop what holds it "
                "or choose another (0 picks a free port)"
            )
        self.port = self.port or free_port()
        self.endpoint = PgEndpoint("127.0.0.1", self.port, *self._names())
        self._prepare_dir()
        fresh = not (self.pgdata / "PG_VERSION").exists()
        if fresh:
            self._initdb(bin_dir)
        settings = self.pgdata / "replicator.conf"
        settings.write_text(_SETTINGS.format(port=self.port))
        if self.os_user is not None:
            shutil.chown(settings, self.os_user, self.os_user)
        log_offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        result = self._run(
            [str(bin_dir / "pg_ctl"), "start", "-D", str(self.pgdata), "-l", str(self.log_file),
             "-w", "-t", str(int(timeout_s))],
            check=False,
        )  # fmt: skip
        if result.returncode != 0:
            reason = self._first_error(log_offset) or " ".join(result.stderr.split())
            raise SetupError(f"PostgreSQL did not start ({reason}); log: {self.log_file}")
        self._running = True
        self._wait_ready(bin_dir)
        if fresh:
            self._create_role_and_database()
        return self.dsn

    def _names(self) -> tuple[str, str, str]:
        return self.endpoint.user, self.endpoint.password, self.endpoint.dbname

    def _prepare_dir(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.os_user is None:
            return
        try:
            shutil.chown(self.data_dir, self.os_user, self.os_user)
        except LookupError as exc:
            raise SetupError(
                f"system user {self.os_user!r} not found: {_INSTALL}, or pass os_user="
            ) from exc
        probe = self._run(["test", "-w", str(self.data_dir)], check=False)
        if probe.returncode != 0:
            raise SetupError(
                f"user {self.os_user} cannot write {self.data_dir}: choose a directory whose "
                "parents are world-searchable (e.g. under /tmp)"
            )

    def _initdb(self, bin_dir: Path) -> None:
        pwfile = self.data_dir / "superuser.pw"
        pwfile.write_text(self.endpoint.password + "\n")
        if self.os_user is not None:
            shutil.chown(pwfile, self.os_user, self.os_user)
        result = self._run(
            [str(bin_dir / "initdb"), "-D", str(self.pgdata), "-U", "postgres", "-E", "UTF8",
             "--locale=C", "--no-sync", "--auth-local=trust", "--auth-host=scram-sha-256",
             f"--pwfile={pwfile}"],
            check=False,
        )  # fmt: skip
        pwfile.unlink()
        if result.returncode != 0:
            raise SetupError(f"initdb in {self.pgdata} failed: {result.stderr.strip()[-300:]}")
        with (self.pgdata / "postgresql.conf").open("a") as conf:
            conf.write("\ninclude_if_exists = 'replicator.conf'\n")

    def _wait_ready(self, bin_dir: Path) -> None:
        ready = self._run(
            [str(bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-t", "30"],
            check=False,
        )
        if ready.returncode != 0:
            self.stop()
            raise SetupError(f"PostgreSQL is not accepting connections; log: {self.log_file}")

    def _create_role_and_database(self) -> None:
        user, password, database = self._names()
        with connect(self.superuser_dsn) as conn:
            conn.execute(
                f"CREATE ROLE {_ident(user)} LOGIN REPLICATION PASSWORD {_literal(password)}"
            )
        self.create_database(database)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the server (fast shutdown: roll back open transactions, then exit)."""
        if not self._running:
            return
        self._running = False
        with contextlib.suppress(SetupError):
            self._run(
                [str(find_bin_dir() / "pg_ctl"), "stop", "-D", str(self.pgdata), "-m", "fast",
                 "-w", "-t", str(int(timeout_s))],
                check=False,
            )  # fmt: skip

    def _run(self, argv: list[str], *, check: bool) -> subprocess.CompletedProcess[str]:
        prefix = ["runuser", "-u", self.os_user, "--"] if self.os_user else []
        return subprocess.run(
            [*prefix, *argv], capture_output=True, text=True, check=check, cwd=self.data_dir
        )

    def _first_error(self, offset: int) -> str:
        """The first FATAL/ERROR line the server logged after ``offset`` (else its last line)."""
        with contextlib.suppress(OSError), self.log_file.open("rb") as log:
            log.seek(offset)
            lines = log.read().decode(errors="replace").splitlines()
            errors = [ln for ln in lines if "FATAL" in ln or "ERROR" in ln]
            return (errors[0] if errors else (lines[-1] if lines else ""))[:300]
        return ""

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
        if self._temporary:
            shutil.rmtree(self.data_dir, ignore_errors=True)


def _port_in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
