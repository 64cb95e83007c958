"""The window reads the engine's state only by the names protocol.State declares: a key the GUI
reads that the engine never sends would silently read None.

mypy (pyproject.toml's [tool.mypy], run by CI) checks the files it lists: there `state` is a
`protocol.State` and a misspelt key, by `state["key"]` or `state.get("key")`, is a type error.
The scan below covers the GUI files mypy does not check yet."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from irviz.protocol import commands as protocol

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "irviz"
# [tool.mypy]'s `files` (tomllib is 3.11+; the project runs on 3.10)
MYPY_FILES = re.findall(r'"([^"]+)"', re.search(r"\[tool\.mypy\][^\[]*?files = \[(.*?)\]",
                                                 (REPO / "pyproject.toml").read_text(), re.S).group(1))
GUI_FILES = [p for p in [*sorted((ROOT / "ui").rglob("*.py")), ROOT / "cli" / "snapshot.py"]
             if str(p.relative_to(REPO)) not in MYPY_FILES]
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


MISSPELT = '''\
from irviz.protocol.commands import State


def model(state: State | None) -> object:
    return state.get("model") if state else None


def cursor(state: State) -> int:
    return state["cursor"]


def misspelt_get(state: State) -> object:
    return state.get("modle")


def misspelt_index(state: State) -> object:
    return state["cursr"]


def misspelt_step_key(state: State) -> object:
    return state["steps"][0].get("pas")
'''


def test_mypy_reports_a_misspelt_state_key(tmp_path):
    if subprocess.run([sys.executable, "-m", "mypy", "--version"], capture_output=True).returncode != 0:
        pytest.skip("mypy is not installed (pip install -e .[lint])")
    target = tmp_path / "probe.py"
    target.write_text(MISSPELT)
    # the project's settings and plugin; irviz found from the checkout
    out = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
                          "--cache-dir", str(tmp_path / "cache"), str(target)],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    lines = sorted(int(e.split(":")[1]) for e in errors)
    assert lines == [13, 17, 21], out.stdout + out.stderr
    assert any('"modle"' in e for e in errors) and any('"cursr"' in e for e in errors)
    assert any('"StepEntry" has no key "pas"' in e for e in errors)
