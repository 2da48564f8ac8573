"""Producer id allocation for InitProducerId (Kafka's ``ProducerIdManager``).

Kafka's controller hands out blocks of 1000 ids and records each block in the metadata log; here the
end of the last block handed out is kept in ``kafkalog-producer-ids`` in the data directory (written
and fsynced before an id of a new block is used), so ids are never reused across restarts.

A data directory without that file (one a Kafka broker wrote, whose ids live in its metadata log) may
still hold producers: the broker calls ``ensure_above`` with the highest producer id its partitions'
producer state and ``__transaction_state`` name before serving, so that a new producer never gets the
id of an old one (whose epoch and sequences the partitions would hold against it).
"""

from __future__ import annotations

import logging
from pathlib import Path

from kafkalog.errors import KafkaStorageError
from kafkalog.storage.files import write_file_atomically

__all__ = ["PRODUCER_ID_FILE", "ProducerIdManager"]

log = logging.getLogger(__name__)

PRODUCER_ID_FILE = "kafkalog-producer-ids"
BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, data_dir: Path) -> None:
        self._path = Path(data_dir) / PRODUCER_ID_FILE
        self._next = self._block_end = self._read()

    def _read(self) -> int:
        try:
            text = self._path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return 0
        except OSError as e:
            raise KafkaStorageError(f"Cannot read {self._path}: {e}") from e
        try:
            value = int(text)
        except ValueError:
            raise KafkaStorageError(f"{self._path} does not hold a producer id: {text[:40]!r}") from None
        if value < 0:
            raise KafkaStorageError(f"{self._path} holds a negative producer id {value}")
        return value

    def _write(self, block_end: int) -> None:
        # tmp file, fsync, rename, fsync of the directory: a crash keeps the old or the new end.
        write_file_atomically(self._path, f"{block_end}\n".encode("ascii"))

    def ensure_above(self, producer_id: int) -> None:
        """Hand out only ids above ``producer_id``, one the broker already knows. Nothing is written:
        the next block, starting there, is recorded before its first id is used."""
        if producer_id >= self._next:
            log.info("Producer ids start at %d, above producer id %d already in use in %s",
                     producer_id + 1, producer_id, self._path.parent)
            self._next = producer_id + 1

    def generate_producer_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            self._write(self._block_end)
        producer_id = self._next
        self._next += 1
        return producer_id
