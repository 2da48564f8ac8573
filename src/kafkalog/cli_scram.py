"""``kafkalog scram-users``: the SCRAM users of a data directory while no broker runs on it — how the
first user is made before a SASL-only broker starts (Kafka's ``kafka-storage.sh format
--add-scram``). A running broker changes them over the admin API (AlterUserScramCredentials,
``kafka-configs.sh --alter --entity-type users``), and holds the directory's lock meanwhile.

A user is given as Kafka's tools give it: ``'SCRAM-SHA-256=[name=alice,password=alice-secret]'``,
optionally with ``iterations=8192`` (default 4096) for ``add``."""

from __future__ import annotations

import argparse
import re
import secrets
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ScramUserSpec", "add_scram_parser", "parse_scram_user"]

_SPEC = re.compile(r"(?P<mechanism>[A-Z0-9-]+)=\[(?P<fields>.*)\]")
_FIELD = re.compile(r'\s*(?P<key>[a-z]+)=(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<plain>[^,]*))\s*(?:,|$)')


@dataclass(frozen=True, slots=True)
class ScramUserSpec:
    mechanism: str
    name: str
    password: str | None
    iterations: int


def parse_scram_user(text: str) -> ScramUserSpec:
    """``MECHANISM=[name=…,password=…,iterations=…]`` (values may be double-quoted)."""
    from kafkalog.broker.scram import MECHANISMS

    match = _SPEC.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not MECHANISM=[name=USER,password=SECRET]")
    mechanism = match["mechanism"]
    if mechanism not in MECHANISMS:
        raise argparse.ArgumentTypeError(
            f"unknown SCRAM mechanism {mechanism!r}: use one of {', '.join(MECHANISMS)}"
        )
    fields: dict[str, str] = {}
    rest = match["fields"]
    while rest.strip():
        field = _FIELD.match(rest)
        if field is None:
            raise argparse.ArgumentTypeError(f"cannot read {rest!r} in {text!r}: expected key=value")
        value = field["plain"] if field["quoted"] is None else re.sub(r"\\(.)", r"\1", field["quoted"])
        fields[field["key"]] = value
        rest = rest[field.end() :]
    unknown = set(fields) - {"name", "password", "iterations"}
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown field(s) {', '.join(sorted(unknown))} in {text!r}")
    if not fields.get("name"):
        raise argparse.ArgumentTypeError(f"{text!r} names no user (name=…)")
    try:
        iterations = int(fields.get("iterations", "4096"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"iterations in {text!r} is not a number") from None
    return ScramUserSpec(mechanism, fields["name"], fields.get("password"), iterations)


def _store(args: argparse.Namespace) -> Any:
    from kafkalog.broker.scram_credential_store import ScramCredentialStore

    return ScramCredentialStore.load(args.data_dir)


def _alter(args: argparse.Namespace, deletions: list[Any], upsertions: list[Any]) -> int:
    from kafkalog.storage.dir_lock import DataDirLock

    args.data_dir.mkdir(parents=True, exist_ok=True)
    # The broker holds this lock while it runs: it alone writes the file then.
    with DataDirLock(args.data_dir, exclusive=True):
        store = _store(args)
        # One alteration per request: Kafka's rule of one alteration per user and request would
        # otherwise refuse a user given for both mechanisms.
        results = [r for d in deletions for r in store.alter([d], [])]
        results += [r for u in upsertions for r in store.alter([], [u])]
    failed = [r for r in results if r.error != 0]
    for r in results:
        if r.error == 0:
            print(f"{r.user}: done")
        else:
            print(f"{r.user}: {r.error.name.upper()}: {r.message}", file=sys.stderr)
    return 1 if failed else 0


def cmd_scram_add(args: argparse.Namespace) -> int:
    from kafkalog.broker.scram import MECHANISMS, salted_password
    from kafkalog.broker.scram_credential_store import ScramUpsertion
    from kafkalog.errors import InvalidConfigError

    upsertions = []
    for spec in args.users:
        if not spec.password:
            raise InvalidConfigError(f"{spec.name}: a password is needed (password=…)")
        mechanism = MECHANISMS[spec.mechanism]
        salt = secrets.token_bytes(32)
        # Iterations outside Kafka's range are refused by the store, before this costs anything big.
        rounds = min(max(spec.iterations, 1), 16384)
        upsertions.append(
            ScramUpsertion(
                spec.name,
                mechanism.type,
                spec.iterations,
                salt,
                salted_password(mechanism, spec.password, salt, rounds),
            )
        )
    return _alter(args, [], upsertions)


def cmd_scram_delete(args: argparse.Namespace) -> int:
    from kafkalog.broker.scram import MECHANISMS
    from kafkalog.broker.scram_credential_store import ScramDeletion

    return _alter(args, [ScramDeletion(s.name, MECHANISMS[s.mechanism].type) for s in args.users], [])


def cmd_scram_list(args: argparse.Namespace) -> int:
    from kafkalog.broker.scram import mechanism_for_type

    for result in _store(args).describe(None):
        mechanisms = ", ".join(
            f"{getattr(mechanism_for_type(m), 'name', m)} (iterations {i})" for m, i in result.credentials
        )
        print(f"{result.user}: {mechanisms}")
    return 0


def add_scram_parser(commands: Any, data_dir_arg: Callable[[argparse.ArgumentParser], None]) -> None:
    users = commands.add_parser("scram-users", help="add, delete or list SCRAM users (broker stopped)")
    actions = users.add_subparsers(dest="scram_command", metavar="ACTION", parser_class=type(users))
    actions.required = True
    p = actions.add_parser("add", help="add users or replace their passwords")
    data_dir_arg(p)
    p.add_argument(
        "users",
        nargs="+",
        type=parse_scram_user,
        metavar="'SCRAM-SHA-256=[name=U,password=P]'",
        help="a user, as kafka-storage.sh --add-scram takes it (iterations=N optional)",
    )
    p.set_defaults(func=cmd_scram_add)
    p = actions.add_parser("delete", help="delete users' credentials for a mechanism")
    data_dir_arg(p)
    p.add_argument(
        "users",
        nargs="+",
        type=parse_scram_user,
        metavar="'SCRAM-SHA-256=[name=U]'",
        help="a user's credential for one mechanism, as kafka-storage.sh --add-scram names it",
    )
    p.set_defaults(func=cmd_scram_delete)
    p = actions.add_parser("list", help="list the users and their mechanisms (never a key)")
    data_dir_arg(p)
    p.set_defaults(func=cmd_scram_list)
