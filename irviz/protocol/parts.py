"""Big replies in parts: the engine cuts a reply of several MB into lines of a few hundred KB, the
GUI decodes one line per turn of its event loop and puts the result back together.

Decoding the 5 MB reply of an 8B LLM's Relax graph took ~200 ms in one `json.loads`, a stall the
user sees; parts bound every decode. The parts of one reply are written together, in order:

    {"id": 7, "ok": true, "result": {"width": 900, "nodes": [], "edges": []}, "parts": 3}
    {"id": 7, "part": 1, "key": "nodes", "items": [...]}      items appended to result["nodes"]
    {"id": 7, "part": 2, "key": "edges", "items": [...]}
    {"id": 7, "part": 3, "key": "text", "text": "..."}        text appended to result["text"]

Only a successful reply whose result is a dict is split, and only its top-level lists and strings
(a single item bigger than a part goes alone in its part). Plain Python: the GUI imports this."""
from __future__ import annotations

import json
from collections.abc import Callable

# a part's line stays about this size: ~10 ms to decode on a loaded 2-core machine
PART_BYTES = 256 * 1024


def reply_lines(msg: dict, dumps: Callable[[object], str] = json.dumps,
                part_bytes: int = PART_BYTES) -> list[str]:
    """`msg` as protocol lines (no newlines): one line, or a head and its parts when the result is
    big. `dumps` encodes one value (the engine's strict JSON); it is called once per item, so the
    reply is encoded once whether or not it is split."""
    result = msg.get("result")
    if not (msg.get("ok") and isinstance(result, dict)):
        return [dumps(msg)]
    encoded: dict[str, str | list[str]] = {}
    for key, value in result.items():
        if isinstance(value, list) and value:
            encoded[key] = [dumps(v) for v in value]
        elif isinstance(value, str) and len(value) > part_bytes:
            encoded[key] = value     # cut below, at character offsets
    total = sum(len(v) if isinstance(v, str) else sum(len(s) + 1 for s in v) for v in encoded.values())
    if total <= part_bytes:
        return [dumps(msg)]
    rid = dumps(msg.get("id"))
    parts: list[str] = []
    split: set[str] = set()
    for key, enc in encoded.items():
        k = dumps(key)
        if isinstance(enc, str):
            split.add(key)
            for start in range(0, len(enc), part_bytes):
                parts.append(f'{{"id": {rid}, "part": {len(parts) + 1}, "key": {k}, '
                             f'"text": {dumps(enc[start:start + part_bytes])}}}')
            continue
        if sum(len(s) + 1 for s in enc) <= part_bytes // 8:
            continue                 # small lists stay in the head
        split.add(key)
        chunk: list[str] = []
        size = 0
        for s in enc:
            if chunk and size + len(s) > part_bytes:
                parts.append(_items_line(rid, len(parts) + 1, k, chunk))
                chunk, size = [], 0
            chunk.append(s)
            size += len(s) + 1
        if chunk:
            parts.append(_items_line(rid, len(parts) + 1, k, chunk))
    head_result = {key: (type(value)() if key in split else value) for key, value in result.items()}
    head = dict(msg, result=head_result, parts=len(parts))
    return [dumps(head), *parts]


def _items_line(rid: str, n: int, key: str, items: list[str]) -> str:
    return f'{{"id": {rid}, "part": {n}, "key": {key}, "items": [{",".join(items)}]}}'


class PartJoiner:
    """Puts parted replies back together, message by message in the order they arrive.

    ``feed(msg)`` returns the message to act on: ``msg`` itself when it is not part of a parted
    reply, the whole reply when ``msg`` is its last part, None while parts are missing."""

    def __init__(self):
        self._open: dict = {}     # id -> [head, parts still to come, {key: text pieces}]

    def feed(self, msg: dict) -> dict | None:
        rid = msg.get("id")
        if "parts" in msg and "result" in msg:
            n = int(msg["parts"])
            head = {k: v for k, v in msg.items() if k != "parts"}
            if n <= 0:
                return head
            self._open[rid] = [head, n, {}]
            return None
        if "part" not in msg:
            return msg
        entry = self._open.get(rid)
        if entry is None:
            return None              # a part of a reply whose head was lost (engine restarted)
        head, left, texts = entry
        result = head["result"]
        key = msg.get("key")
        if "text" in msg:
            texts.setdefault(key, []).append(str(msg["text"]))
        else:
            result.setdefault(key, []).extend(msg.get("items") or ())
        if left > 1:
            entry[1] = left - 1
            return None
        del self._open[rid]
        for key, pieces in texts.items():
            result[key] = "".join(pieces)
        return head

    def pending(self) -> bool:
        """Whether a reply is half received."""
        return bool(self._open)
