"""`irviz pipelines`: the named pipelines and their passes."""
from __future__ import annotations

import argparse

HELP = "list named pipelines"


def add_arguments(p: argparse.ArgumentParser) -> None:
    pass


def run(args) -> int:
    from irviz.core.passes import PIPELINES  # loads TVM: only for this command

    for name, (description, invocations) in PIPELINES.items():
        print(f"{name}\t{description}: {' → '.join(i.name for i in invocations)}")
    return 0
