"""CLI conventions: JSON objects and arrays as produce keys/values, ``--version``, help for every option."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from kafkalog.cli import build_parser


def run(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkalog.cli", *map(str, args)], input=stdin,
                          capture_output=True, text=True, timeout=60, check=False)


def test_produce_stores_json_objects_and_arrays_as_compact_json_text(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert run("topics", "create", "--data-dir", data, "--topic", "t").returncode == 0
    lines = [
        {"value": {"a": 1, "b": [True, None, "é"]}},
        {"key": ["k", 2], "value": [1, {"x": {}}]},
        {"key": {}, "value": "plain text"},
    ]
    produced = run("produce", "--data-dir", data, "--topic", "t",
                   stdin="".join(json.dumps(line, indent=1).replace("\n", " ") + "\n" for line in lines))
    assert produced.returncode == 0, produced.stderr
    consumed = run("consume", "--data-dir", data, "--topic", "t")
    records = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert [(r["key"], r["value"]) for r in records] == [
        (None, '{"a":1,"b":[true,null,"\\u00e9"]}'),
        ('["k",2]', '[1,{"x":{}}]'),
        ("{}", "plain text"),
    ]
    # with --binary, strings are base64 but objects are still their JSON text
    produced = run("produce", "--data-dir", data, "--topic", "t", "--binary", stdin='{"value": {"n": 1}}\n')
    assert produced.returncode == 0, produced.stderr
    consumed = run("consume", "--data-dir", data, "--topic", "t", "--offset", "3")
    assert json.loads(consumed.stdout)["value"] == '{"n":1}'


def test_other_json_values_are_still_one_clear_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert run("topics", "create", "--data-dir", data, "--topic", "t").returncode == 0
    for bad in ('{"value": 5}', '{"key": true}'):
        result = run("produce", "--data-dir", data, "--topic", "t", stdin=bad + "\n")
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert "must be a string, a JSON object or array, or null" in result.stderr


def test_version() -> None:
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout == f"kafkalog {version('kafkalog')}\n"


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found.extend(_parsers(sub))
    return found


def test_every_option_has_help() -> None:
    missing = []
    parsers = _parsers(build_parser())
    assert len(parsers) > 10
    for parser in parsers:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            if not (action.help and action.help.strip()) or action.help == argparse.SUPPRESS:
                missing.append(f"{parser.prog} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []
