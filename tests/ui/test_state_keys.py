"""The window reads the engine's state only by the names protocol.State declares: a key the GUI
reads that the engine never sends would silently read None.

mypy (pyproject.toml's [tool.mypy], run by CI) checks every GUI file: there the state is a
`protocol.State` and a misspelt key, by `state["key"]` or `state.get("key")`, is a type error.
What mypy cannot see is kept here: that no GUI file is left out of its list, and that no parameter
that takes the state is left unannotated (an unannotated one is `Any`, and its keys go unchecked)."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "irviz"
# [tool.mypy]'s `files` (tomllib is 3.11+; the project runs on 3.10)
MYPY_FILES = re.findall(r'"([^"]+)"', re.search(r"\[tool\.mypy\][^\[]*?files = \[(.*?)\]",
                                                 (REPO / "pyproject.toml").read_text(), re.S).group(1))
GUI_FILES = [*sorted((ROOT / "ui").rglob("*.py")), ROOT / "cli" / "snapshot.py"]
# what the GUI calls the state it got from the engine
STATE_NAMES = {"state", "_state", "prev"}


def under_mypy(path: Path) -> bool:
    rel = path.relative_to(REPO)
    return any(rel == Path(f) or Path(f) in rel.parents for f in MYPY_FILES)


def test_every_gui_file_is_checked_by_mypy():
    assert len(GUI_FILES) > 60
    assert [str(p.relative_to(REPO)) for p in GUI_FILES if not under_mypy(p)] == []


def test_a_new_pane_file_would_be_checked_too(tmp_path):
    # a folder in the list covers the files added to it later
    assert under_mypy(ROOT / "ui" / "panes" / "a_pane_added_later.py")
    assert not under_mypy(ROOT / "cli" / "check.py")


def untyped_state_params(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every parameter named like the state with no annotation naming a State."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
                if arg.arg in STATE_NAMES and (
                        arg.annotation is None or "State" not in ast.unparse(arg.annotation)):
                    out.append((node.lineno, arg.arg))
    return out


def test_every_parameter_that_takes_the_state_is_typed():
    taken, untyped = 0, []
    for path in GUI_FILES:
        tree = ast.parse(path.read_text(), filename=str(path))
        taken += sum(1 for n in ast.walk(tree) if isinstance(n, ast.arg) and n.arg in STATE_NAMES)
        untyped += [f"{path.relative_to(REPO)}:{line}: {name}" for line, name in untyped_state_params(tree)]
    assert taken > 30  # the scan sees the panes' on_state
    assert untyped == [], "type these as protocol.State: " + ", ".join(untyped)


def test_the_scan_finds_an_untyped_state_parameter():
    tree = ast.parse("def on_state(self, state, prev: dict):\n    pass\n"
                     "def ok(state: State | None, prev: State | None):\n    pass\n")
    assert untyped_state_params(tree) == [(1, "state"), (1, "prev")]


# a pane as a new one would be written: each misspelt key below must be reported
PANE = '''\
from irviz.protocol.commands import BuildRunResult, State
from irviz.ui.panes.base import Pane


class ProbePane(Pane):
    def on_state(self, state: State, prev: State | None) -> None:
        self.at = state["cursor"]
        self.model = state.get("model")
        self.bad_get = state.get("modle")
        self.bad_index = state["cursr"]
        self.bad_step = state["steps"][0].get("pas")
        self.bad_prev = prev.get("targte") if prev else None

    def on_reply(self, purpose: str, result: BuildRunResult) -> None:
        self.ms = result["tvm_ms"]
        self.bad_result = result.get("tvm_msec")
        self.bad_kept = self.state.get("spce") if self.state else None
'''


def test_mypy_reports_a_misspelt_key_in_a_pane(tmp_path):
    if subprocess.run([sys.executable, "-m", "mypy", "--version"], capture_output=True).returncode != 0:
        pytest.skip("mypy is not installed (pip install -e .[lint])")
    target = tmp_path / "probe_pane.py"
    target.write_text(PANE)
    # the project's settings and plugin; irviz found from the checkout
    out = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
                          "--cache-dir", str(tmp_path / "cache"), str(target)],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    lines = sorted(int(e.split(":")[1]) for e in errors)
    assert lines == [9, 10, 11, 12, 16, 17], out.stdout + out.stderr
    for key in ("modle", "cursr", "targte", "tvm_msec", "spce"):
        assert any(f'"{key}"' in e for e in errors), key
    assert any('"StepEntry" has no key "pas"' in e for e in errors)
    assert any('"BuildRunResult" has no key "tvm_msec"' in e for e in errors)
