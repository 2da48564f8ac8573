"""The authorizer (Kafka's ``StandardAuthorizer``, enabled by
``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer``): who may do what,
from the ACLs made with CreateAcls and kept in ``kafkalog-acls.json`` in the data directory (Kafka
keeps them in its metadata log).

How a request is decided (``StandardAuthorizerData.authorize``), for a principal from a host
performing an operation on a resource:

1. a principal named in ``super.users`` (``User:admin;User:ops``) may do everything;
2. the ACLs that apply are those on the resource's type whose pattern covers its name — LITERAL
   with that name, LITERAL ``*``, PREFIXED with a prefix of it — and whose principal (or
   ``User:*``) and host (or ``*``) match;
3. a matching DENY wins over everything; else a matching ALLOW grants. ALLOW READ, WRITE, DELETE or
   ALTER implies DESCRIBE, and ALLOW ALTER_CONFIGS implies DESCRIBE_CONFIGS (not so for DENY);
   ALL stands for every operation;
4. nothing matched: denied — unless the resource has no ACLs at all, for anyone, and
   ``allow.everyone.if.no.acl.found=true``.

Denials are logged on ``kafkalog.authorizer`` at INFO, as Kafka's ``kafka.authorizer.logger`` does.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import (
    ALL_HOSTS,
    CLUSTER_NAME,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAcl,
)
from kafkalog.broker.config import KafkaConfig
from kafkalog.errors import InvalidConfigError, KafkaStorageError
from kafkalog.storage.files import write_file_atomically

__all__ = ["ACLS_FILE", "STANDARD_AUTHORIZER", "AclResult", "StandardAuthorizer"]

ACLS_FILE = "kafkalog-acls.json"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

audit = logging.getLogger("kafkalog.authorizer")

_O = AclOperation
_IMPLIES_DESCRIBE = frozenset({_O.DESCRIBE, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS})


@dataclass(frozen=True, slots=True)
class AclResult:
    """One creation's or one deletion filter's outcome."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None
    acls: tuple[StandardAcl, ...] = ()  # a deletion's matched (and removed) ACLs


def _concerns(acl: StandardAcl, principal: str, host: str) -> bool:
    """Whether ``acl`` speaks to this principal (or to every one) connecting from this host (or any)."""
    return acl.principal in (principal, WILDCARD_PRINCIPAL) and acl.host in (ALL_HOSTS, host)


def _grants(acl: StandardAcl, operation: AclOperation) -> bool:
    """Whether ``acl`` (principal and host already matched) speaks to ``operation``."""
    if acl.operation == _O.ALL:
        return True
    if acl.permission_type == AclPermissionType.ALLOW:
        if operation == _O.DESCRIBE:
            return acl.operation in _IMPLIES_DESCRIBE
        if operation == _O.DESCRIBE_CONFIGS:
            return acl.operation in _IMPLIES_DESCRIBE_CONFIGS
    return acl.operation == operation


def _validate_new(acl: StandardAcl) -> str | None:
    """What is wrong with an ACL to create (Kafka's ``AclApis`` and ``validateNewAcl``), or None.
    One check is kafkalog's own: a principal without ``Type:``, which Kafka stores and then cannot
    parse at each authorization (``StandardAcl.kafkaPrincipal``) — refused here instead."""
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {acl.resource_type.name}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {acl.pattern_type.name}"
    if acl.operation in (_O.UNKNOWN, _O.ANY):
        return f"Invalid operation {acl.operation.name}"
    if acl.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {acl.permission_type.name}"
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not acl.resource_name:
        return "Invalid empty resource name"
    if ":" not in acl.principal:  # Kafka stores it, then fails every authorization it is met in
        return (
            f"Could not parse principal from `{acl.principal}` (no colon is present separating the "
            "principal type from the principal name)"
        )
    return None


def _acl_to_json(acl: StandardAcl) -> dict[str, str]:
    return {
        "resource_type": acl.resource_type.name,
        "resource_name": acl.resource_name,
        "pattern_type": acl.pattern_type.name,
        "principal": acl.principal,
        "host": acl.host,
        "operation": acl.operation.name,
        "permission_type": acl.permission_type.name,
    }


def _acl_from_json(item: dict[str, str]) -> StandardAcl:
    acl = StandardAcl(
        ResourceType[item["resource_type"]],
        str(item["resource_name"]),
        PatternType[item["pattern_type"]],
        str(item["principal"]),
        str(item["host"]),
        AclOperation[item["operation"]],
        AclPermissionType[item["permission_type"]],
    )
    problem = _validate_new(acl)
    if problem is not None:
        raise ValueError(problem)
    return acl


class StandardAuthorizer:
    def __init__(
        self,
        directory: Path | str,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
        acls: Iterable[StandardAcl] = (),
    ) -> None:
        self.path = Path(directory) / ACLS_FILE
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[StandardAcl, None] = dict.fromkeys(acls)  # insertion-ordered set
        # What ``authorize`` scans: the LITERAL ACLs of one resource by (type, name), and per type the
        # ACLs that may cover many names (PREFIXED, and LITERAL "*") — not every ACL of the type.
        self._literal: dict[tuple[ResourceType, str], list[StandardAcl]] = {}
        self._broad: dict[ResourceType, list[StandardAcl]] = {}
        self._index()

    @classmethod
    def from_config(cls, config: KafkaConfig, directory: Path | str) -> StandardAuthorizer | None:
        """The authorizer ``authorizer.class.name`` names, None when it is empty (no authorization,
        as in Kafka); InvalidConfigError for another class, a bad super user or a bad ACL file."""
        name = config.get_str("authorizer.class.name", "").strip()
        if not name:
            return None
        if name != STANDARD_AUTHORIZER:
            raise InvalidConfigError(
                f"authorizer.class.name={name}: kafkalog serves {STANDARD_AUTHORIZER} only "
                "(Kafka 4 has no other)"
            )
        super_users = [u.strip() for u in config.get_str("super.users", "").split(";") if u.strip()]
        for user in super_users:
            if ":" not in user:  # Kafka's parseKafkaPrincipal: split(":", 2) must give two parts
                raise InvalidConfigError(
                    f"super.users: expected a string in format principalType:principalName but got {user}"
                )
        allow = config.get_bool("allow.everyone.if.no.acl.found")
        return cls(directory, super_users, allow, cls._load(Path(directory) / ACLS_FILE))

    @staticmethod
    def _load(path: Path) -> list[StandardAcl]:
        try:
            document = json.loads(path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as e:
            raise InvalidConfigError(f"Cannot read the ACLs in {path}: {e}") from e
        try:
            return [_acl_from_json(item) for item in document["acls"]]
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InvalidConfigError(
                f'Cannot read the ACLs in {path}: {e!s} (expected {{"acls": [{{"resource_type": "TOPIC", '
                '"resource_name", "pattern_type": "LITERAL", "principal", "host", "operation": "READ", '
                '"permission_type": "ALLOW"}]})'
            ) from e

    def _index(self) -> None:
        literal: dict[tuple[ResourceType, str], list[StandardAcl]] = {}
        broad: dict[ResourceType, list[StandardAcl]] = {}
        for acl in self._acls:
            if acl.pattern_type == PatternType.LITERAL and acl.resource_name != WILDCARD:
                literal.setdefault((acl.resource_type, acl.resource_name), []).append(acl)
            else:
                broad.setdefault(acl.resource_type, []).append(acl)
        self._literal, self._broad = literal, broad

    # -- deciding ------------------------------------------------------------------------------------

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        log_denied: bool = True,
    ) -> bool:
        if principal in self.super_users:
            return True
        allowed = False
        has_resource_acls = False
        literal, broad = self._literal.get((resource_type, name), ()), self._broad.get(resource_type, ())
        for acl in itertools.chain(literal, broad):
            if not acl.matches_resource(resource_type, name):
                continue
            has_resource_acls = True
            if not _concerns(acl, principal, host) or not _grants(acl, operation):
                continue
            if acl.permission_type == AclPermissionType.DENY:
                if log_denied:
                    self._log_denied(principal, host, operation, resource_type, name, f"a DENY ACL {acl}")
                return False
            allowed = True
        if allowed:
            return True
        if not has_resource_acls and self.allow_everyone_if_no_acl_found:
            return True
        if log_denied:
            self._log_denied(principal, host, operation, resource_type, name, "no matching ALLOW ACL")
        return False

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether ``principal`` may ``operation`` on some resource of the type, whichever (Kafka's
        ``Authorizer.authorizeByResourceType``, which StandardAuthorizer inherits): an ALLOW for the
        principal and host on some name or prefix that no DENY covers. Only the operation itself or
        ALL counts (no implied DESCRIBE)."""
        # A made-up name first: it lets super users through whatever the DENYs say, and honours
        # allow.everyone.if.no.acl.found for a resource no ACL speaks about.
        if self.authorize(principal, host, operation, resource_type, "hardcode", log_denied=False):
            return True
        denied_literals: set[str] = set()
        denied_prefixes: set[str] = set()
        allowed: list[tuple[PatternType, str]] = []
        wildcard_allowed = False
        for acl in self._acls:
            if acl.resource_type != resource_type or not _concerns(acl, principal, host):
                continue
            if acl.operation not in (operation, _O.ALL):
                continue
            literal = acl.pattern_type == PatternType.LITERAL
            if acl.permission_type == AclPermissionType.DENY:
                if literal and acl.resource_name == WILDCARD:
                    return False  # denied on every resource of the type
                (denied_literals if literal else denied_prefixes).add(acl.resource_name)
            elif acl.permission_type == AclPermissionType.ALLOW:
                if literal and acl.resource_name == WILDCARD:
                    wildcard_allowed = True
                else:
                    allowed.append((acl.pattern_type, acl.resource_name))
        if wildcard_allowed:
            return True
        # An allowed name or prefix counts unless a DENY covers it all: the same literal, or a prefix.
        return any(
            not (pattern == PatternType.LITERAL and name in denied_literals)
            and not any(name.startswith(prefix) for prefix in denied_prefixes)
            for pattern, name in allowed
        )

    @staticmethod
    def _log_denied(
        principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str, why: str
    ) -> None:
        if audit.isEnabledFor(logging.INFO):
            audit.info(
                "Principal = %s is Denied operation = %s from host = %s on resource = %s:LITERAL:%s (%s)",
                principal,
                operation.name,
                host,
                resource_type.name,
                name,
                why,
            )

    # -- the ACL APIs --------------------------------------------------------------------------------

    def acls(self, binding_filter: AclBindingFilter) -> list[StandardAcl]:
        return [acl for acl in self._acls if binding_filter.matches(acl)]

    def create_acls(self, acls: Iterable[StandardAcl]) -> list[AclResult]:
        """Each ACL added (an existing one is a success that adds nothing), persisted before the
        answer; INVALID_REQUEST with Kafka's message for one that cannot be."""
        results: list[AclResult] = []
        added: list[StandardAcl] = []
        for acl in acls:
            problem = _validate_new(acl)
            if problem is not None:
                results.append(AclResult(ErrorCode.invalid_request, problem))
                continue
            if acl not in self._acls and acl not in added:
                added.append(acl)
            results.append(AclResult())
        if not added:
            return results
        return self._replace({**self._acls, **dict.fromkeys(added)}, results)

    def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[AclResult]:
        """Per filter, the ACLs it matched, all removed together; a filter with an UNKNOWN part is
        INVALID_REQUEST."""
        results: list[AclResult] = []
        removed: dict[StandardAcl, None] = {}
        for binding_filter in filters:
            problem = binding_filter.unknown_part()
            if problem is not None:
                results.append(AclResult(ErrorCode.invalid_request, problem))
                continue
            matched = tuple(acl for acl in self._acls if binding_filter.matches(acl))
            removed.update(dict.fromkeys(matched))
            results.append(AclResult(acls=matched))
        if not removed:
            return results
        return self._replace({acl: None for acl in self._acls if acl not in removed}, results)

    def _replace(self, acls: dict[StandardAcl, None], results: list[AclResult]) -> list[AclResult]:
        """Persist ``acls`` and serve them from now on; if the file cannot be written nothing
        changes, and what would have succeeded is KAFKA_STORAGE_ERROR."""
        document = {"version": 1, "acls": [_acl_to_json(acl) for acl in acls]}
        try:
            write_file_atomically(self.path, (json.dumps(document, indent=2) + "\n").encode())
        except KafkaStorageError as e:
            return [AclResult(ErrorCode.kafka_storage_error, str(e)) if r.error == 0 else r for r in results]
        self._acls = acls
        self._index()
        return results
