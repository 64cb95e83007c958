"""The corpus's results file: one JSON with a row per model × pipeline × target, rewritten
atomically after each row (a kill or Ctrl-C between rows leaves the last complete file), read
back by a rerun to skip the rows it holds."""
from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from pathlib import Path

from irviz.core.corpus.rows import RESULTS, key

FORMAT = "irviz-corpus/1"


class CorpusError(ValueError):
    """A results file this run cannot continue (not a corpus file, unreadable)."""


class Store:
    """The rows so far (those of an earlier run first) and whatever else the file holds (kept)."""

    def __init__(self, path: str | Path, meta: dict | None = None):
        self.path = Path(path)
        self.data: dict = {"format": FORMAT}
        self.rows: list[dict] = []
        if self.path.exists():
            self._load()
        self.data.update(meta or {})

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError) as e:
            raise CorpusError(f"{self.path}: cannot read it as a corpus's JSON ({e}); give another "
                              f"--json or remove it") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("models"), list):
            raise CorpusError(f"{self.path} is not a corpus results file (no \"format\": \"{FORMAT}\" "
                              f"with \"models\"); give another --json")
        self.rows = data.pop("models")
        data.pop("summary", None)
        self.data.update(data)

    def done(self) -> set[tuple]:
        return {key(r) for r in self.rows}

    def todo(self, jobs: list[dict]) -> list[dict]:
        """The jobs without a row yet, each once, in the order given."""
        seen = self.done()
        out = []
        for job in jobs:
            if key(job) not in seen:
                seen.add(key(job))
                out.append(job)
        return out

    def add(self, row: dict) -> None:
        self.rows = [r for r in self.rows if key(r) != key(row)] + [row]

    def summary(self) -> dict:
        counts = Counter(r.get("result") for r in self.rows)
        return {"rows": len(self.rows), **{k: counts.get(k, 0) for k in RESULTS}}

    def write(self) -> None:
        """The whole file, replaced in one rename."""
        text = json.dumps({**self.data, "summary": self.summary(), "models": self.rows}, indent=1)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=self.path.name + ".", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text + "\n")
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
