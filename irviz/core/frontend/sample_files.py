"""Sample model files shipped as package data in irviz/samples (work after a plain `pip install .`).

They are read and run as files, never imported as modules: the core sits below them.
"""
from __future__ import annotations

import ast
from importlib.resources import files
from pathlib import Path

from irviz.core.errors import LoadError
from irviz.core.frontend.files import is_ir_file

# Display order; any other *.py dropped into irviz/samples follows alphabetically.
_ORDER = ("mlp", "matmul_relu", "mul_add", "small_cnn", "resnet18", "gpt",
          "course_te", "course_emit_te", "course_mymodule", "course_extern", "course_mixture",
          "course_bind_params", "course_bind_params_mixture", "course_primfunc_only", "course_fx_mlp",
          "course_chapter_passes", "course_schedule_steps")


def is_ir_sample(name: str) -> bool:
    """True when sample `name` is an IR file (an IRModule), not a PyTorch model."""
    return name in _names(models_only=False) and is_ir_file(samples_dir() / f"{name}.py")


def samples_dir() -> Path:
    return Path(str(files("irviz") / "samples")).resolve()


def _defines_get_model(path: Path) -> bool:
    """True when the file defines get_model() at top level (read without importing it)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return False
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "get_model"
               for n in tree.body)


def _openable(path: Path) -> bool:
    """A model file (get_model()) or an IR file (an IRModule): what `sample:NAME` can open."""
    return _defines_get_model(path) or is_ir_file(path)


def _names(models_only: bool = True) -> list[str]:
    """Sample names in display order; ``models_only``: files that open as a sample, model files
    and IR files (not, e.g., the example converter file that ships beside them)."""
    found = {p.stem for p in samples_dir().glob("*.py") if not p.stem.startswith("_")
             and (not models_only or _openable(p))}
    return [n for n in _ORDER if n in found] + sorted(found.difference(_ORDER))


def _description(path: Path) -> str:
    """First line of the module docstring, read without importing (no torch work)."""
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    except (OSError, SyntaxError, ValueError):
        return ""
    return doc.strip().splitlines()[0].strip() if doc and doc.strip() else ""


def list_samples() -> list[tuple[str, str]]:
    """[(name, one-line description)] in display order."""
    d = samples_dir()
    return [(n, _description(d / f"{n}.py")) for n in _names()]


def sample_path(name: str) -> Path:
    """Path of the sample file `name` (a model, or another file shipped there such as
    example_converter); LoadError listing the known sample models if unknown."""
    if name in _names(models_only=False):
        return samples_dir() / f"{name}.py"
    names = _names()
    raise LoadError(
        f"Unknown sample {name!r}.",
        hint=f"Known samples: {', '.join(names)} (use sample:NAME, e.g. sample:{names[0] if names else 'mlp'}).",
    )
