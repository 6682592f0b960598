"""The ends of the partitions a transactional writer wrote: the positions its commit reports
for partitions only it writes, and the wait until a committed transaction's records are visible
to read-committed readers (Kafka writes the commit markers after the commit returns)."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping

from cdc.streams import kafka_client as kc
from cdc.streams.kafka_errors import KafkaCommitUnknownError


class PartitionEnds:
    """Reads partition ends with an admin client, renewed while a read fails."""

    def __init__(self, bootstrap: str, extra: kc.Config) -> None:
        self._bootstrap, self._extra = bootstrap, extra
        self._admin = kc.make_admin(bootstrap, extra)

    def read(
        self, partitions: Collection[tuple[str, int]], deadline: float, *, committed: bool
    ) -> dict[tuple[str, int], int]:
        """``kc.end_offsets``, asked again with a new admin client while it fails until
        ``deadline``: a client's metadata from before a broker restart gets every answer
        refused (FENCED_LEADER_EPOCH) and is not renewed by librdkafka."""
        while True:
            try:
                return kc.end_offsets(self._admin, partitions, committed=committed,
                                      timeout_s=max(1.0, deadline - time.monotonic()))  # fmt: skip
            except kc.KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
                self._admin = kc.make_admin(self._bootstrap, self._extra)

    def wait_visible(
        self, written: Mapping[tuple[str, int], int], timeout_s: float, transactional_id: str
    ) -> None:
        """Return once each partition's last stable offset reaches its position in
        ``written``; :class:`KafkaCommitUnknownError` after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        waiting = dict(written)
        while waiting:  # one request per check for all partitions: a commit does 4-6 a second
            try:
                ends = self.read(list(waiting), deadline, committed=True)
            except kc.KafkaException as exc:
                raise KafkaCommitUnknownError(  # committed: its records are not lost
                    f"transaction of {transactional_id} committed, but the ends of its "
                    f"partitions could not be read within {timeout_s:.0f}s: {exc}"
                ) from exc
            waiting = {w: p for w, p in waiting.items() if ends.get(w, -1) < p}
            if waiting and time.monotonic() > deadline:
                (topic, partition), _ = next(iter(waiting.items()))
                raise KafkaCommitUnknownError(
                    f"committed records of {topic} partition {partition} did not become "
                    f"visible within {timeout_s:.0f}s"
                )
            if waiting:
                time.sleep(0.002)
