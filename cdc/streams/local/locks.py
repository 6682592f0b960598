"""An exclusive lock on a file, held against other processes and other threads of this process.

``flock`` locks belong to an open file description, so two handles of one process exclude each
other just as two processes do; a process-wide ``threading.Lock`` per path makes waiting threads
block instead of spinning. The kernel drops the lock when its holder dies (``kill -9`` included).
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
import uuid

from cdc.streams.local.errors import WriterLockTimeout

_LABEL_BYTES = 200
_TOKEN_BYTES = 64 + _LABEL_BYTES
_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


def _thread_lock(path: str) -> threading.Lock:
    with _THREAD_LOCKS_GUARD:
        return _THREAD_LOCKS.setdefault(path, threading.Lock())


class FileLock:
    """An exclusive lock on ``path`` (created if missing).

    Each acquisition writes a fresh token (the holder's pid, a random part, then ``label``) into
    the file, so ``undisturbed`` tells whether nobody else held the lock since this object last
    released it, and ``holder_label`` who holds it now.
    """

    def __init__(self, path: str, *, label: str = "") -> None:
        if len(label.encode()) > _LABEL_BYTES or any(c.isspace() for c in label):
            raise ValueError(f"a lock label is one word of at most {_LABEL_BYTES} bytes: {label!r}")
        self.path = os.path.realpath(path)
        self.label = label
        self.undisturbed = False
        self._thread_lock = _thread_lock(self.path)
        self._fd: int | None = None
        self._token = b""

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def acquire(self, timeout_s: float) -> None:
        """Take the lock, waiting up to ``timeout_s``; raise WriterLockTimeout naming the holder."""
        deadline = time.monotonic() + timeout_s
        if not self._thread_lock.acquire(timeout=max(timeout_s, 0.0)):
            raise WriterLockTimeout(f"{self.path} is held by another thread of this process")
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            delay = 0.001
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        holder = os.pread(fd, _TOKEN_BYTES, 0).decode(errors="replace").split()
                        os.close(fd)
                        raise WriterLockTimeout(
                            f"{self.path} is held by process {holder[0] if holder else '?'} "
                            f"for more than {timeout_s}s"
                        ) from None
                    time.sleep(delay)
                    delay = min(delay * 2, 0.05)
            previous = os.pread(fd, _TOKEN_BYTES, 0)
            self.undisturbed = bool(self._token) and previous == self._token
            token = f"{os.getpid()} {uuid.uuid4().hex} {self.label}"
            self._token = token.encode().ljust(_TOKEN_BYTES)
            os.pwrite(fd, self._token, 0)
            self._fd = fd
        except BaseException:
            self._thread_lock.release()
            raise

    def release(self) -> None:
        """Release the lock (no-op if not held); any thread may release it."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
            self._thread_lock.release()


def holder_label(path: str) -> str | None:
    """The label of whoever holds the lock on ``path`` now (``""`` if unlabelled); None when
    nobody does. Takes nothing: a probe that finds the lock free lets it go at once."""
    try:
        fd = os.open(os.path.realpath(path), os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            words = os.pread(fd, _TOKEN_BYTES, 0).decode(errors="replace").split()
            return words[2] if len(words) > 2 else ""
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
