"""`irviz samples`: the sample models, each opened as sample:NAME."""
from __future__ import annotations

import argparse

from irviz.core.frontend.sample_files import list_samples

HELP = "list sample models (use as sample:NAME)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    pass


def run(args) -> int:
    for name, description in list_samples():
        print(f"{name}\t{description}")
    return 0
