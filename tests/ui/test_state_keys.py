"""The window reads the engine's state only by the names protocol.State declares: a key the GUI
reads that the engine never sends would silently read None."""
from __future__ import annotations

import ast
from pathlib import Path

from irviz import protocol

ROOT = Path(__file__).resolve().parents[2] / "irviz"
GUI_FILES = [*sorted((ROOT / "ui").rglob("*.py")), ROOT / "snapshot.py"]
# what the GUI calls the state it got from the engine
STATE_NAMES = {"state", "_state"}


def _receiver_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def state_keys_read(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, key) of every `state["key"]` and `state.get("key", ...)` in a module."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _receiver_name(node.value) in STATE_NAMES \
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            out.append((node.lineno, node.slice.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "get" and _receiver_name(node.func.value) in STATE_NAMES \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            out.append((node.lineno, node.args[0].value))
    return out


def test_the_state_typeddict_is_what_the_engine_sends():
    assert set(protocol.State.__annotations__) == protocol.STATE_KEYS


def test_every_state_key_the_gui_reads_is_declared():
    declared = set(protocol.State.__annotations__)
    read, unknown = 0, []
    for path in GUI_FILES:
        for line, key in state_keys_read(ast.parse(path.read_text(), filename=str(path))):
            read += 1
            if key not in declared:
                unknown.append(f"{path.relative_to(ROOT.parent)}:{line}: {key!r}")
    assert read > 50  # the scan sees the window's reads
    assert unknown == [], "keys not in protocol.State: " + ", ".join(unknown)


def test_the_scan_finds_an_undeclared_key():
    tree = ast.parse("def f(self, state):\n    return self.state.get('modle'), state['cursor']\n")
    assert state_keys_read(tree) == [(2, "modle"), (2, "cursor")]
