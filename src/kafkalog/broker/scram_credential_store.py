"""The broker's SCRAM users (Kafka keeps them as ``UserScramCredentialRecord``s in its metadata log;
``ScramControlManager`` alters them, ``ScramImage`` describes them, ``CredentialCache`` answers
logins). kafkalog keeps them in ``kafkalog-scram-credentials.json`` in the data directory
(docs/FORMAT.md §7), rewritten atomically on every change, so a user added over the admin API can
log in at once and after a restart.

Only the salt, the iteration count, StoredKey and ServerKey are kept (``broker/scram.py``): the file
lets nobody log in, though like Kafka's metadata log it lets an attacker try passwords offline, so
it is written owner-readable only.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kio.schema.errors import ErrorCode

from kafkalog.broker.handlers import register_component
from kafkalog.broker.scram import (
    MAX_ITERATIONS,
    MECHANISMS,
    ScramCredential,
    ScramMechanism,
    credential_from_salted_password,
    mechanism_for_type,
)
from kafkalog.errors import InvalidConfigError, KafkaStorageError
from kafkalog.storage.files import write_file_atomically

__all__ = [
    "SCRAM_CREDENTIALS",
    "SCRAM_CREDENTIALS_FILE",
    "AlterResult",
    "DescribeResult",
    "ScramCredentialStore",
    "ScramDeletion",
    "ScramUpsertion",
]

SCRAM_CREDENTIALS_FILE = "kafkalog-scram-credentials.json"
SCRAM_CREDENTIALS = "scram_credentials"  # the broker component: apis.components[SCRAM_CREDENTIALS]


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    name: str
    mechanism: int  # the admin API's type: 1 SHA-256, 2 SHA-512


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class AlterResult:
    user: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None


@dataclass(frozen=True, slots=True)
class DescribeResult:
    user: str
    credentials: tuple[tuple[int, int], ...] = ()  # (mechanism type, iterations)
    error: ErrorCode = ErrorCode.none
    message: str | None = None


def _validate(name: str, mechanism: int) -> AlterResult | None:
    """Kafka's ``validateScramUsernameAndMechanism``."""
    if not name:
        return AlterResult(name, ErrorCode.unacceptable_credential, "Username must not be empty")
    if mechanism_for_type(mechanism) is None:
        return AlterResult(name, ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
    return None


class ScramCredentialStore:
    """user -> mechanism name -> credential, persisted in ``directory``."""

    def __init__(self, directory: Path | str, credentials: dict[str, dict[str, ScramCredential]]) -> None:
        self.path = Path(directory) / SCRAM_CREDENTIALS_FILE
        self._credentials = credentials

    @classmethod
    def load(cls, directory: Path | str) -> ScramCredentialStore:
        """The users kept in ``directory`` (none if it has no file); InvalidConfigError naming the
        file and what is wrong with it otherwise."""
        path = Path(directory) / SCRAM_CREDENTIALS_FILE
        try:
            document = json.loads(path.read_text())
        except FileNotFoundError:
            return cls(directory, {})
        except (OSError, ValueError) as e:
            raise InvalidConfigError(f"Cannot read the SCRAM credentials in {path}: {e}") from e
        credentials: dict[str, dict[str, ScramCredential]] = {}
        try:
            for user, by_mechanism in document["users"].items():
                for name, fields in by_mechanism.items():
                    if name not in MECHANISMS:
                        raise ValueError(f"unknown mechanism {name!r}")
                    iterations = fields["iterations"]
                    if not isinstance(iterations, int) or isinstance(iterations, bool):
                        raise ValueError(f"iterations of {user} must be an integer")
                    credentials.setdefault(str(user), {})[name] = ScramCredential(
                        salt=base64.b64decode(fields["salt"], validate=True),
                        stored_key=base64.b64decode(fields["stored_key"], validate=True),
                        server_key=base64.b64decode(fields["server_key"], validate=True),
                        iterations=iterations,
                    )
        except (KeyError, TypeError, AttributeError, ValueError, binascii.Error) as e:
            raise InvalidConfigError(
                f"Cannot read the SCRAM credentials in {path}: {e!s} (expected "
                '{"users": {user: {mechanism: {"salt", "stored_key", "server_key": base64, '
                '"iterations": int}}}})'
            ) from e
        return cls(directory, credentials)

    def credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._credentials.get(user, {}).get(mechanism.name)

    def users(self) -> list[str]:
        return sorted(self._credentials)

    def describe(self, users: Iterable[str] | None) -> list[DescribeResult]:
        """Kafka's ``ScramImage.describe``: every user when ``users`` is None or empty; a user asked
        twice is DUPLICATE_RESOURCE, one without credentials RESOURCE_NOT_FOUND."""
        asked = list(users or ())
        if not asked:
            asked = list(self._credentials)
        counts: dict[str, int] = {}
        for user in asked:
            counts[user] = counts.get(user, 0) + 1
        results = []
        for user, count in counts.items():
            if count > 1:
                results.append(
                    DescribeResult(
                        user,
                        error=ErrorCode.duplicate_resource,
                        message="Cannot describe SCRAM credentials for the same user twice in a single "
                        f"request: {user}",
                    )
                )
                continue
            found = self._credentials.get(user, {})
            if not found:
                results.append(
                    DescribeResult(
                        user,
                        error=ErrorCode.resource_not_found,
                        message=f"Attempt to describe a user credential that does not exist: {user}",
                    )
                )
                continue
            infos = tuple((m.type, found[m.name].iterations) for m in MECHANISMS.values() if m.name in found)
            results.append(DescribeResult(user, credentials=infos))
        return results

    def alter(
        self, deletions: Iterable[ScramDeletion], upsertions: Iterable[ScramUpsertion]
    ) -> list[AlterResult]:
        """Kafka's ``ScramControlManager.alterCredentials``: each user at most once per request
        (else DUPLICATE_RESOURCE for that user), deletions of absent credentials RESOURCE_NOT_FOUND,
        iterations within [4096, 16384] (UNACCEPTABLE_CREDENTIAL); the valid alterations apply
        together and are persisted before the answer."""
        errors: dict[str, AlterResult] = {}
        to_delete: dict[str, ScramDeletion] = {}
        to_upsert: dict[str, ScramUpsertion] = {}
        duplicate = "A user credential cannot be altered twice in the same request"
        for deletion in deletions:
            if deletion.name in errors:
                continue
            if to_delete.pop(deletion.name, None) is not None:
                errors[deletion.name] = AlterResult(deletion.name, ErrorCode.duplicate_resource, duplicate)
                continue
            failure = _validate(deletion.name, deletion.mechanism)
            mechanism = mechanism_for_type(deletion.mechanism)
            if (
                failure is None
                and mechanism is not None
                and self.credential(deletion.name, mechanism) is None
            ):
                failure = AlterResult(
                    deletion.name,
                    ErrorCode.resource_not_found,
                    "Attempt to delete a user credential that does not exist",
                )
            if failure is not None:
                errors[deletion.name] = failure
            else:
                to_delete[deletion.name] = deletion
        for upsertion in upsertions:
            if upsertion.name in errors:
                continue
            if (
                to_delete.pop(upsertion.name, None) is not None
                or to_upsert.pop(upsertion.name, None) is not None
            ):
                errors[upsertion.name] = AlterResult(upsertion.name, ErrorCode.duplicate_resource, duplicate)
                continue
            failure = _validate(upsertion.name, upsertion.mechanism)
            if failure is None and upsertion.iterations < 4096:
                failure = AlterResult(upsertion.name, ErrorCode.unacceptable_credential, "Too few iterations")
            elif failure is None and upsertion.iterations > MAX_ITERATIONS:
                failure = AlterResult(
                    upsertion.name, ErrorCode.unacceptable_credential, "Too many iterations"
                )
            if failure is not None:
                errors[upsertion.name] = failure
            else:
                to_upsert[upsertion.name] = upsertion
        updated = {user: dict(by_mechanism) for user, by_mechanism in self._credentials.items()}
        for deletion in to_delete.values():
            mechanism = mechanism_for_type(deletion.mechanism)
            assert mechanism is not None
            updated[deletion.name].pop(mechanism.name, None)
            if not updated[deletion.name]:
                del updated[deletion.name]
        for upsertion in to_upsert.values():
            mechanism = mechanism_for_type(upsertion.mechanism)
            assert mechanism is not None
            updated.setdefault(upsertion.name, {})[mechanism.name] = credential_from_salted_password(
                mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
            )
        if to_delete or to_upsert:
            try:
                self._persist(updated)
            except KafkaStorageError as e:
                failed = [*to_delete, *to_upsert]
                return [
                    *(AlterResult(n, ErrorCode.kafka_storage_error, str(e)) for n in failed),
                    *errors.values(),
                ]
            self._credentials = updated
        return [
            *(AlterResult(name) for name in to_delete),
            *(AlterResult(name) for name in to_upsert),
            *errors.values(),
        ]

    def _persist(self, credentials: dict[str, dict[str, ScramCredential]]) -> None:
        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        document = {
            "version": 1,
            "users": {
                user: {
                    name: {
                        "salt": b64(c.salt),
                        "stored_key": b64(c.stored_key),
                        "server_key": b64(c.server_key),
                        "iterations": c.iterations,
                    }
                    for name, c in sorted(by_mechanism.items())
                }
                for user, by_mechanism in sorted(credentials.items())
            },
        }
        write_file_atomically(self.path, (json.dumps(document, indent=2) + "\n").encode(), mode=0o600)


register_component(SCRAM_CREDENTIALS, lambda apis: ScramCredentialStore.load(apis.log_manager.data_dir))
