"""One exception hierarchy for all of kafkalog.

Names follow Apache Kafka's exception classes (``CorruptRecordException`` ->
``CorruptRecordError`` ...), so a reader of Kafka's source recognises each failure.
Every message should say *what* was wrong and *where* (file, position, offset).
"""

from __future__ import annotations


class KafkaLogError(Exception):
    """Base class of every error kafkalog raises on purpose."""


# --- records: bytes that are not what they claim to be -------------------------------------------


class CorruptRecordError(KafkaLogError):
    """Bytes fail an integrity check: bad CRC, impossible size, truncated where data must exist."""


class DecompressionError(CorruptRecordError):
    """A compressed record set its codec cannot decompress although its CRC held. Corrupt data to
    recovery and readers; on produce Kafka answers it as an unexpected error (its codecs throw a
    KafkaException, not CorruptRecordException), UNKNOWN_SERVER_ERROR, which clients do not retry."""


class InvalidRecordError(KafkaLogError):
    """Bytes are intact but break a format or semantic rule (counts, offsets, keys, magic)."""


class RecordValidationError(InvalidRecordError):
    """LogValidator rejected individual records; ``record_errors`` lists (batch_index, message).
    ``client_message`` is the text Kafka's ``processRecordErrors`` gives a producer (the message
    itself says where in the append, for a reader of logs)."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]] | None = None,
                 client_message: str | None = None) -> None:
        super().__init__(message)
        self.record_errors: list[tuple[int, str]] = list(record_errors or [])
        self.client_message = message if client_message is None else client_message


class InvalidTimestampError(RecordValidationError):
    """A timestamp is out of the allowed range, or of the wrong type for the topic."""


class RecordTooLargeError(KafkaLogError):
    """A batch is larger than ``max.message.bytes``."""


class RecordBatchTooLargeError(KafkaLogError):
    """An append is larger than ``segment.bytes`` and can never fit in a segment."""


class UnsupportedCompressionTypeError(KafkaLogError):
    """A codec id that is unknown, or not allowed with this magic (zstd needs magic 2)."""


class UnknownCompressionTypeError(UnsupportedCompressionTypeError):
    """A codec id no Kafka version defines (5-7 in a batch's attributes): where Kafka meets one its
    ``CompressionType.forId`` throws IllegalArgumentException, an UNKNOWN_SERVER_ERROR to a client."""


class UnsupportedForMessageFormatError(KafkaLogError):
    """A feature (transactions, idempotence, headers) that the target message format lacks."""


class OffsetsOutOfOrderError(KafkaLogError):
    """Offsets in an append with pre-assigned offsets do not increase."""


class UnexpectedAppendOffsetError(KafkaLogError):
    """A follower append starts below the log end offset."""


# --- storage -------------------------------------------------------------------------------------


class OffsetOutOfRangeError(KafkaLogError):
    """A read or truncation names an offset outside [log start offset, log end offset]."""


class InvalidOffsetError(KafkaLogError):
    """An index append that does not increase the offset."""


class IndexOffsetOverflowError(KafkaLogError):
    """offset - baseOffset does not fit the 32-bit relative offset of an index entry."""


class LogSegmentOffsetOverflowError(KafkaLogError):
    """A segment would hold an offset that does not fit its 32-bit relative range."""


class CorruptIndexError(KafkaLogError):
    """An index file fails its sanity check."""


class KafkaStorageError(KafkaLogError):
    """An I/O failure, or a data directory in a state kafkalog cannot work with."""


class SegmentReplacedError(KafkaStorageError):
    """A read-only reader's segment was replaced on disk by a writer in another process (the
    cleaner's swap, retention) after the reader opened it: its indexes no longer match its data."""


class LogDirLockedError(KafkaStorageError):
    """Another process holds the data directory's ``.lock``."""


class InvalidConfigError(KafkaLogError):
    """A configuration name or value that Kafka would not accept."""


class PolicyViolationError(KafkaLogError):
    """A request the topic's configuration forbids (Kafka's PolicyViolationException): deleting
    records of a compacted topic that does not also delete by retention."""


class UnknownTopicOrPartitionError(KafkaLogError):
    """The named topic or partition does not exist in the data directory."""


class TopicExistsError(KafkaLogError):
    """A topic that is being created exists already."""


class IllegalIndexOperationError(KafkaLogError):
    """An index call Kafka rejects with IllegalArgument/IllegalStateException: an append to a full
    index, ``entry(n)`` past the end, a time-index timestamp going backwards, a bad index size."""


class InvalidTopicError(InvalidConfigError):
    """A topic name Kafka would reject (empty, '.', '..', too long, characters outside [a-zA-Z0-9._-]), or
    an internal topic a client appends to (both Kafka's InvalidTopicException)."""


class CorruptSnapshotError(KafkaStorageError):
    """A producer-state snapshot file fails its version, structure or CRC-32C check."""


class IllegalArgumentError(KafkaLogError, ValueError):
    """A call with an argument Kafka rejects with IllegalArgumentException (a negative size, a slice
    starting past the end, an append that would overflow a segment): a caller's mistake, not bad data."""


class NoSuchFileError(KafkaStorageError, FileNotFoundError):
    """A file that must exist does not (Kafka's NoSuchFileException): e.g. a segment's ``.index``
    at load, which makes the loader recover that segment."""


class OutOfOrderSequenceError(KafkaLogError):
    """An idempotent producer's batch does not continue its sequence (Kafka's OutOfOrderSequenceException)."""


class InvalidProducerEpochError(KafkaLogError):
    """A producer wrote with an epoch older than the one the partition has seen."""


class InvalidTxnStateError(KafkaLogError):
    """A write that contradicts the producer's transaction state (e.g. non-transactional data inside a
    transaction)."""


class TransactionCoordinatorFencedError(KafkaLogError):
    """An end-transaction marker from a coordinator epoch older than the one already seen."""


# --- protocol / broker ---------------------------------------------------------------------------


class InvalidRequestError(KafkaLogError):
    """A request frame that cannot be parsed: a size out of range, a truncated header or body, bytes
    left over, a value no schema allows (Kafka's InvalidRequestException: the connection is closed)."""


class UnsupportedVersionError(InvalidRequestError):
    """A request for an API key this broker does not serve, or at a version outside its range."""


class FencedLeaderEpochError(KafkaLogError):
    """A request names a leader epoch older than the partition's: the client's metadata is stale."""


class UnknownLeaderEpochError(KafkaLogError):
    """A request names a leader epoch newer than the partition's."""


class BrokerNotAvailableError(KafkaLogError):
    """The broker is not running (not started yet, or shut down)."""


class SaslAuthenticationError(KafkaLogError):
    """A SASL login that did not succeed (Kafka's SaslAuthenticationException); the message is
    what the client is told, in SaslAuthenticate's error message."""


class SslPrincipalMappingError(KafkaLogError):
    """A client certificate's subject that ``ssl.principal.mapping.rules`` cannot map (Kafka's
    ``NoMatchingRule``, or a replacement Java's regex rejects): the connection is closed at its
    first request, as Kafka's ``DefaultKafkaPrincipalBuilder`` failing does."""
