"""Shared fixtures (keep minimal)."""
from __future__ import annotations

import textwrap

import pytest


@pytest.fixture
def tmp_model_file(tmp_path):
    """make(source, name="model.py") -> Path: write a (dedented) model file into tmp_path."""

    def make(source: str, name: str = "model.py"):
        path = tmp_path / name
        path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
        return path

    return make
