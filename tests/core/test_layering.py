"""The split that keeps the window alive: core never imports Qt, ui never imports torch/TVM."""
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "irviz"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_core_never_imports_qt():
    offenders = {str(p.relative_to(ROOT)): _imports(p) & {"PySide6", "shiboken6", "PyQt5", "PyQt6"}
                 for p in (ROOT / "core").rglob("*.py")}
    assert not {k: v for k, v in offenders.items() if v}


def test_ui_never_imports_torch_or_tvm_statically():
    offenders = {str(p.relative_to(ROOT)): _imports(p) & {"torch", "tvm", "tvm_ffi"}
                 for p in (ROOT / "ui").rglob("*.py")}
    assert not {k: v for k, v in offenders.items() if v}


def test_importing_the_ui_loads_neither_torch_nor_tvm():
    # Transitive check: what the GUI process really has in sys.modules after importing every ui module.
    code = (
        "import importlib, pkgutil, sys\n"
        "import irviz.ui\n"
        "for m in pkgutil.walk_packages(irviz.ui.__path__, 'irviz.ui.'):\n"
        "    importlib.import_module(m.name)\n"
        "import irviz.cli, irviz.protocol\n"
        "bad = sorted(k for k in sys.modules if k.split('.')[0] in ('torch', 'tvm', 'tvm_ffi'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"QT_QPA_PLATFORM": "offscreen", **__import__("os").environ})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
