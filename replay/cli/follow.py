"""The rounds of ``--follow``: one after another until Ctrl-C, riding out outages.

A round that finds new events is followed at once by the next; one that finds nothing waits
``--poll`` seconds. A round that fails because the stream or the sink could not be reached or
stayed busy (:class:`~cdc.errors.UnavailableError`: the broker down or restarting, the DuckDB
file held by another process) is retried after a back-off that doubles from
``RETRY_FIRST_S`` up to ``RETRY_MAX_S``, with one line on stderr per failure (a Spark job failed
by its Kafka source not reaching the brokers counts too: ``replay.reading.kafka_source_errors``;
a one-off run stops on it with that one line instead of a Java trace). A login the brokers
refuse (:class:`~cdc.errors.LoginRefusedError`) stops the command at once unless a round has
succeeded before: then the credentials worked, and their service (LDAP, Kerberos, an OAuth
provider) is more likely down than the URL wrong. Retrying is
safe: a round commits its rows and their offsets in one sink transaction, so a failed round
left nothing behind and the next starts from the ledger. Any other error (bad data under
``--on-error fail``, a schema the table cannot take) stops the command as before.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from cdc.errors import LoginRefusedError, UnavailableError, one_line
from replay.reading.kafka_source_errors import kafka_source_error

RETRY_FIRST_S = 0.5
RETRY_MAX_S = 30.0


def follow_rounds(
    run_round: Callable[[], bool],
    *,
    follow: bool,
    poll_s: float,
    warn: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Run ``run_round`` (which returns whether it applied anything) once, or with ``follow``
    until interrupted; see the module doc for the waits and the retries."""
    warn = warn or _to_stderr
    backoff, worked = RETRY_FIRST_S, False
    while True:
        try:
            applied = run_round()
        except Exception as exc:
            ours = isinstance(exc, (UnavailableError, LoginRefusedError))
            found = exc if ours else kafka_source_error(exc)
            if found is None or (found is exc and not follow):
                raise
            retried = (UnavailableError, LoginRefusedError) if worked else UnavailableError
            if not (follow and isinstance(found, retried)):
                raise found from exc
            warn(f"round failed: {one_line(found)}; retrying in {backoff:g}s")
            sleep(backoff)
            backoff = min(backoff * 2, RETRY_MAX_S)
            continue
        backoff, worked = RETRY_FIRST_S, True
        if not follow:
            return
        if not applied:  # caught up: wait; else the next round starts at once
            sleep(poll_s)


def _to_stderr(text: str) -> None:
    print(f"replicator: {text}", file=sys.stderr, flush=True)
