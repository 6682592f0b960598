"""A seeded random workload on two PostgreSQL tables, recording the changes Debezium should emit.

``accounts`` (int key, REPLICA IDENTITY FULL) and ``entries`` (composite key, default replica
identity) cover numeric(12,2), text, timestamptz, date, boolean, jsonb and uuid. Every statement
changes one row, except the TRUNCATE; transactions group one to three statements.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

ACCOUNTS, ENTRIES = "public.accounts", "public.entries"
TABLES = (ACCOUNTS, ENTRIES)
KEY_COLUMNS = {ACCOUNTS: ("id",), ENTRIES: ("account_id", "seq")}
SCHEMA = """
CREATE TABLE accounts (
  id integer PRIMARY KEY, owner text NOT NULL, balance numeric(12,2), opened date,
  active boolean NOT NULL, updated_at timestamptz, profile jsonb, external_id uuid);
ALTER TABLE accounts REPLICA IDENTITY FULL;
CREATE TABLE entries (
  account_id integer, seq integer, amount numeric(12,2) NOT NULL, memo text,
  booked_at timestamptz NOT NULL, booked_on date NOT NULL, PRIMARY KEY (account_id, seq));
"""
_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
_OWNERS = ("Zoë", "O'Brien", 'quote "q"', "emoji 🚀", "line\nbreak", "")


@dataclass(frozen=True)
class Change:
    """A change event Debezium should emit: op ``c``/``u``/``d``/``t``; key ``()`` for ``t``."""

    table: str
    op: str
    key: tuple[Any, ...]


@dataclass
class Workload:
    """Runs statements on an autocommit psycopg connection and remembers what they changed."""

    conn: Any
    seed: int
    rng: random.Random = field(init=False)
    accounts: set[int] = field(default_factory=set)
    entries: set[tuple[int, int]] = field(default_factory=set)
    changes: list[Change] = field(default_factory=list)
    transactions: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def create_schema(self) -> None:
        self.conn.execute(SCHEMA)

    def seed_rows(self, accounts: int, entries: int) -> None:
        """Rows present before the capture starts (its snapshot); not recorded as changes."""
        for _ in range(accounts):
            self._insert_account()
        for _ in range(entries):
            self._insert_entry()
        self.changes.clear()

    def run(self, transactions: int) -> None:
        """``transactions`` random transactions of one to three single-row statements."""
        steps = (self._insert_account, self._update_account, self._delete_account,
                 self._insert_entry, self._update_entry, self._delete_entry)  # fmt: skip
        for _ in range(transactions):
            with self.conn.transaction():
                for _ in range(self.rng.randint(1, 3)):
                    self.rng.choice(steps)()
            self.transactions += 1

    def change_keys(self) -> None:
        """A primary-key change per table, each its own transaction (Debezium: d, tombstone, c)."""
        old = self.rng.choice(sorted(self.accounts))
        new = max(self.accounts) + 1000
        self.conn.execute("UPDATE accounts SET id = %s WHERE id = %s", (new, old))
        self.accounts = (self.accounts - {old}) | {new}
        self.changes += [Change(ACCOUNTS, "d", (old,)), Change(ACCOUNTS, "c", (new,))]
        account, seq = self.rng.choice(sorted(self.entries))
        moved = (account, seq + 10_000)
        self.conn.execute(
            "UPDATE entries SET seq = %s WHERE account_id = %s AND seq = %s",
            (moved[1], account, seq),
        )
        self.entries = (self.entries - {(account, seq)}) | {moved}
        self.changes += [Change(ENTRIES, "d", (account, seq)), Change(ENTRIES, "c", moved)]
        self.transactions += 2

    def truncate_entries(self) -> None:
        self.conn.execute("TRUNCATE entries")
        self.entries.clear()
        self.changes.append(Change(ENTRIES, "t", ()))
        self.transactions += 1

    def _insert_account(self) -> None:
        key = max(self.accounts, default=0) + 1
        self.conn.execute(
            "INSERT INTO accounts VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb, %s)",
            (key, *self._account_values()),
        )
        self.accounts.add(key)
        self.changes.append(Change(ACCOUNTS, "c", (key,)))

    def _update_account(self) -> None:
        if not self.accounts:
            return self._insert_account()
        key = self.rng.choice(sorted(self.accounts))
        self.conn.execute(
            "UPDATE accounts SET owner = %s, balance = %s, opened = %s, active = %s, "
            "updated_at = %s, profile = %s::jsonb, external_id = %s WHERE id = %s",
            (*self._account_values(), key),
        )
        self.changes.append(Change(ACCOUNTS, "u", (key,)))

    def _delete_account(self) -> None:
        if not self.accounts:
            return
        key = self.rng.choice(sorted(self.accounts))
        self.conn.execute("DELETE FROM accounts WHERE id = %s", (key,))
        self.accounts.discard(key)
        self.changes.append(Change(ACCOUNTS, "d", (key,)))

    def _insert_entry(self) -> None:
        account = self.rng.randint(1, 8)
        key = (account, max((s for a, s in self.entries if a == account), default=0) + 1)
        self.conn.execute(
            "INSERT INTO entries VALUES (%s, %s, %s, %s, %s, %s)", (*key, *self._entry_values())
        )
        self.entries.add(key)
        self.changes.append(Change(ENTRIES, "c", key))

    def _update_entry(self) -> None:
        if not self.entries:
            return self._insert_entry()
        key = self.rng.choice(sorted(self.entries))
        self.conn.execute(
            "UPDATE entries SET amount = %s, memo = %s, booked_at = %s, booked_on = %s "
            "WHERE account_id = %s AND seq = %s",
            (*self._entry_values(), *key),
        )
        self.changes.append(Change(ENTRIES, "u", key))

    def _delete_entry(self) -> None:
        if not self.entries:
            return
        key = self.rng.choice(sorted(self.entries))
        self.conn.execute("DELETE FROM entries WHERE account_id = %s AND seq = %s", key)
        self.entries.discard(key)
        self.changes.append(Change(ENTRIES, "d", key))

    def _account_values(self) -> tuple[Any, ...]:
        rng = self.rng
        profile = {"tier": rng.choice(["gold", "basic"]), "tags": ["a", rng.randint(0, 9)]}
        return (
            rng.choice(_OWNERS) + str(rng.randint(0, 99)),
            self._maybe(self._money()),
            self._maybe(self._date()),
            rng.random() < 0.5,
            self._maybe(self._instant()),
            self._maybe(json.dumps(profile)),
            self._maybe(uuid.UUID(int=rng.getrandbits(128))),
        )

    def _entry_values(self) -> tuple[Any, ...]:
        memo = self._maybe("memo " + str(self.rng.randint(0, 10**6)))
        return self._money(), memo, self._instant(), self._date()

    def _money(self) -> Decimal:
        return Decimal(self.rng.randint(-(10**12) + 1, 10**12 - 1)).scaleb(-2)

    def _date(self) -> dt.date:
        return dt.date(1970, 1, 1) + dt.timedelta(days=self.rng.randint(-3650, 30000))

    def _instant(self) -> dt.datetime:
        return _EPOCH + dt.timedelta(microseconds=self.rng.randint(0, 10**15))

    def _maybe(self, value: Any) -> Any:
        return None if self.rng.random() < 0.15 else value
