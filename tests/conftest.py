"""Shared fixtures (keep minimal)."""
from __future__ import annotations

import os
import textwrap

import pytest

# Engines started by the tests (in-process, as subprocesses or by the bridge) get the test-only
# commands (`crash`, for the restart path); a user's engine never has them.
os.environ["IRVIZ_TEST_COMMANDS"] = "1"


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
