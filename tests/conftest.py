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


@pytest.fixture(autouse=True, scope="session")
def _private_decision_cache(tmp_path_factory):
    """Measured CPU decisions go to a cache of this test run, never the user's (subprocesses too)."""
    import os

    os.environ["IRVIZ_CACHE_DIR"] = str(tmp_path_factory.mktemp("irviz-cache"))
