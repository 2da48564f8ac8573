"""``java.util.Properties`` text: Java's reading rules and ``Properties.store``'s escapes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kafkalog.errors import KafkaStorageError
from kafkalog.storage.java_properties import load_properties, store_properties

DATE = datetime(2024, 10, 25, 3, 33, 1, tzinfo=UTC)


def test_load_properties_follows_java_rules() -> None:
    text = (
        "# comment\n"
        "! another comment\n"
        "   \n"
        "a=1\n"
        "  b : 2\n"
        "c 3\n"
        "d\t=\t4 with trailing space \n"
        "e\\:key=5\n"
        "f=six \\\n"
        "    continued\n"
        "g=\\u0041\\t\\n\\=\n"
        "h\n"
        "i=x=y\n"
        "# not a continuation \\\n"
        "j=\\\\\n"
    )
    assert load_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4 with trailing space ",
        "e:key": "5",
        "f": "six continued",
        "g": "A\t\n=",
        "h": "",
        "i": "x=y",
        "j": "\\",
    }


def test_store_properties_escapes_and_round_trips() -> None:
    props = {"k e=y:": " lead#!", "tabs": "a\tb\nc", "uni": "é€😀", "empty": ""}
    text = store_properties(props, date=DATE)
    assert text.isascii()
    assert "k\\ e\\=y\\:=\\ lead\\#\\!" in text
    assert "uni=\\u00E9\\u20AC\\uD83D\\uDE00" in text
    assert load_properties(text) == props


def test_bad_unicode_escape_is_a_storage_error() -> None:
    with pytest.raises(KafkaStorageError, match="uxxxx"):
        load_properties("a=\\u12x4\n")
