"""What the local services (Kafka broker, PostgreSQL, Debezium capture) share: the context
manager around ``start``/``stop``, and stopping a child process group politely, then firmly."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from types import TracebackType
from typing import Any, Self


class LocalService:
    """A service run as child processes: ``with Service(...) as s:`` starts and stops it."""

    def start(self) -> Any:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def terminate_group(process: subprocess.Popen[Any], timeout_s: float) -> None:
    """SIGTERM the process group of ``process``; SIGKILL it if it has not exited in time."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
