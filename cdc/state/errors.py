"""Errors of the local state stores and of state transactions, and the mapping of
RocksDB's error messages onto them (damaged files, busy store, anything else)."""

from __future__ import annotations

from cdc.errors import UserError


class StateStoreError(UserError, RuntimeError):
    """A state store cannot be opened or used (bad URL, closed, in use by another process)."""


class StateStoreBusyError(StateStoreError):
    """The store's directory is open (locked) by another process, or another handle."""


class CorruptStateStoreError(StateStoreError):
    """The store's directory is damaged, or is a RocksDB database that is not a state store.

    The processor recovers by destroying the directory (``destroy_state_store``) and rebuilding
    the state from the changelog.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"state store at {path} is unusable: {reason}; "
            "destroy it and rebuild the state from the changelog"
        )


class StateTransactionError(RuntimeError):
    """A state transaction was used out of order (after its end, or nested in another one)."""


def is_corruption(exc: BaseException) -> bool:
    """Whether a RocksDB error says the files are damaged (rather than busy or unreachable)."""
    message = str(exc)
    return "Corruption" in message or "No such file or directory" in message


def store_error(path: str, exc: BaseException, *, opening: bool = False) -> StateStoreError:
    """The error to raise for ``exc``, raised by RocksDB opening (or using) the store at ``path``.

    When opening, "Invalid argument" is a database this store cannot open as its own (e.g. one
    with column families), so it counts as damage too.
    """
    if isinstance(exc, StateStoreError):
        return exc
    message = str(exc)
    if is_corruption(exc) or (opening and message.startswith("Invalid argument")):
        return CorruptStateStoreError(path, message)
    if "lock hold" in message or "While lock file" in message:
        return StateStoreBusyError(f"state store at {path} is open in another process: {message}")
    return StateStoreError(f"state store at {path}: {message}")
