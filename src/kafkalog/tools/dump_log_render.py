"""Printing a ``FileDump``: Kafka's ``DumpLogSegments`` text, or one JSON document per file."""

from __future__ import annotations

import json
from typing import IO, Any

from kafkalog.tools.dump_log import DumpOptions, FileDump

__all__ = ["RECORD_INDENT", "render_text", "write_json"]

# Kafka's DumpLogSegments prefixes every deep-iteration line with this.
RECORD_INDENT = "|"


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


def _java_optional_long(value: int | None) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _format_batch(item: dict[str, Any]) -> str:
    if "baseOffset" in item:
        head = (f"baseOffset: {item['baseOffset']} lastOffset: {item['lastOffset']} count: {item['count']} "
                f"baseSequence: {item['baseSequence']} lastSequence: {item['lastSequence']} "
                f"producerId: {item['producerId']} producerEpoch: {item['producerEpoch']} "
                f"partitionLeaderEpoch: {item['partitionLeaderEpoch']} "
                f"isTransactional: {_java_bool(item['isTransactional'])} "
                f"isControl: {_java_bool(item['isControl'])} "
                f"deleteHorizonMs: {_java_optional_long(item['deleteHorizonMs'])}")
    else:
        head = f"offset: {item['offset']}"
    return (f"{head} position: {item['position']} {item['timestampType']}: {item['maxTimestamp']} "
            f"size: {item['size']} magic: {item['magic']} compresscodec: {item['compresscodec']} "
            f"crc: {item['crc']} isvalid: {_java_bool(item['isvalid'])}")


def _format_record(record: dict[str, Any], options: DumpOptions) -> str:
    parts = []
    prefix = f"{RECORD_INDENT} "
    if not options.skip_record_metadata:
        text = (f"{prefix}offset: {record['offset']} {record['timestampType']}: {record['timestamp']} "
                f"keySize: {record['keySize']} valueSize: {record['valueSize']}")
        prefix = " "
        if "sequence" in record:
            text += f" sequence: {record['sequence']} headerKeys: [{','.join(record['headerKeys'])}]"
        if "isValid" in record:
            text += f" isValid: {_java_bool(record['isValid'])} crc: {record['crc']}"
        if "endTxnMarker" in record:
            text += f" endTxnMarker: {record['endTxnMarker']} coordinatorEpoch: {record['coordinatorEpoch']}"
        elif "controlType" in record:
            text += f" controlType: {record['controlType']}"
        parts.append(text)
    if "error" in record:
        parts.append(f"{prefix}error: {record['error']}")
    elif "payload" in record and isinstance(record["key"], dict):  # --offsets-decoder
        compact = (",", ":")
        payload = record["payload"]
        parts.append(f"{prefix}key: {json.dumps(record['key'], separators=compact)} payload: "
                     + (payload if isinstance(payload, str) else json.dumps(payload, separators=compact)))
    elif "payload" in record:
        if record["key"] is not None:
            parts.append(f"{prefix}key: {record['key']}")
            prefix = " "
        if record["payload"] is not None:
            parts.append(f" payload: {record['payload']}")
    return "".join(parts)


def _format_item(dump: FileDump, item: dict[str, Any], options: DumpOptions) -> list[str]:
    kind = dump.kind
    if kind == "log":
        lines = [_format_batch(item)]
        lines.extend(_format_record(r, options) for r in item.get("records", ()))
        if "error" in item:
            lines.append(f"{RECORD_INDENT} error: {item['error']}")
        return lines
    if kind == "index":
        return [f"offset: {item['offset']} position: {item['position']}"]
    if kind == "timeindex":
        return [f"timestamp: {item['timestamp']} offset: {item['offset']}"]
    if kind == "txnindex":
        return [f"version: {item['version']} producerId: {item['producerId']} "
                f"firstOffset: {item['firstOffset']} lastOffset: {item['lastOffset']} "
                f"lastStableOffset: {item['lastStableOffset']}"]
    line = (f"producerId: {item['producerId']} producerEpoch: {item['producerEpoch']} "
            f"coordinatorEpoch: {item['coordinatorEpoch']} "
            f"currentTxnFirstOffset: {_java_optional_long(item['currentTxnFirstOffset'])} "
            f"lastTimestamp: {item['lastTimestamp']}")
    if "lastOffset" in item:
        line += (f" firstSequence: {item['firstSequence']} lastSequence: {item['lastSequence']} "
                 f"lastOffset: {item['lastOffset']} offsetDelta: {item['offsetDelta']} "
                 f"timestamp: {item['timestamp']}")
    return [line]


def render_text(dump: FileDump, options: DumpOptions, out: IO[str], err: IO[str]) -> None:
    """Print a dump the way Kafka's DumpLogSegments does (findings on ``err``)."""
    out.write(f"Dumping {dump.path}\n")
    if dump.kind == "log":
        start = dump.head["startOffset"]
        out.write(f"Log starting offset: {'unknown' if start is None else start}\n")
    for item in dump.items:
        for line in _format_item(dump, item, options):
            out.write(line + "\n")
    for message in dump.messages:
        out.write(message + "\n")
    for line in dump.errors:
        err.write(line + "\n")


def write_json(dump: FileDump, out: IO[str]) -> None:
    """One JSON document (one line) for the file; items are streamed, never all held in memory."""
    head = json.dumps(dump.head, separators=(",", ":"))
    out.write(head[:-1] + f',"{dump.list_key}":[')
    first = True
    for item in dump.items:
        if not first:
            out.write(",")
        out.write(json.dumps(item, separators=(",", ":")))
        first = False
    tail = json.dumps(dump.tail(), separators=(",", ":"))
    out.write("]" + ("," + tail[1:] if tail != "{}" else "}") + "\n")
