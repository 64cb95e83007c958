"""The command tables of docs/engine_protocol.md, written from the command table in irviz.protocol.commands.

    python -m irviz.protocol.doc            rewrite the generated blocks of the doc
    python -m irviz.protocol.doc --check    exit 1 if the doc differs from what would be written

Each block sits between `<!-- BEGIN commands:SECTION -->` and `<!-- END commands:SECTION -->`; the
prose around the blocks is kept as it is. tests/protocol/test_protocol.py fails when the doc is stale.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from irviz.protocol.commands import COMMANDS, TEST_COMMANDS, Arg
from irviz.protocol.argtypes import type_text

DOC = Path(__file__).resolve().parents[2] / "docs" / "engine_protocol.md"
_BLOCK = re.compile(r"(<!-- BEGIN commands:(\w+) -->\n)(.*?)(<!-- END commands:\2 -->)", re.S)


def _arg(a: Arg) -> str:
    kind = type_text(a.type)
    head = f"`{a.name}` ({kind}, required)" if a.required else \
        f"`{a.name}`={json.dumps(list(a.default) if isinstance(a.default, tuple) else a.default)} ({kind})"
    return f"{head}: {a.doc}" if a.doc else head


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def section_table(section: str) -> str:
    rows = [c for c in (*COMMANDS.values(), *TEST_COMMANDS.values()) if c.section == section]
    if not rows:
        raise KeyError(f"no protocol command is in section {section!r}")
    lines = ["| cmd | args | result | state | stage |", "|---|---|---|---|---|"]
    for c in rows:
        args = "; ".join(_arg(a) for a in c.args) or "–"
        lines.append(f"| `{c.name}` | {_cell(args)} | {_cell(c.result)} | "
                     f"{'✓' if c.returns_state else ''} | {c.stage} |")
    return "\n".join(lines) + "\n"


def sections() -> list[str]:
    out: list[str] = []
    for c in (*COMMANDS.values(), *TEST_COMMANDS.values()):
        if c.section not in out:
            out.append(c.section)
    return out


def render(text: str) -> str:
    """`text` (the doc) with every generated block written afresh; a section of the table without
    its block in the doc is an error, so a new section cannot be left out silently."""
    found = {m.group(2) for m in _BLOCK.finditer(text)}
    missing = [s for s in sections() if s not in found]
    if missing:
        raise ValueError(f"{DOC.name} has no block for section(s) {', '.join(missing)}: add "
                         f"<!-- BEGIN commands:NAME --> / <!-- END commands:NAME --> lines")
    return _BLOCK.sub(lambda m: m.group(1) + section_table(m.group(2)) + m.group(4), text)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = DOC.read_text(encoding="utf-8")
    new = render(text)
    if "--check" in argv:
        if new != text:
            print(f"{DOC} is stale: run python -m irviz.protocol.doc", file=sys.stderr)
            return 1
        return 0
    if new != text:
        DOC.write_text(new, encoding="utf-8")
        print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
