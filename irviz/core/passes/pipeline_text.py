"""Pipelines as one line of text, as MLIR's ``--pass-pipeline`` writes them:

    BindParams(params=w.npz),LegalizeOps,LibraryDispatch(min_macs=0),FuseOps,FuseTIR

* passes are separated by commas; a pass's parameters go in parentheses as ``name=value``;
* a value is bare (``0``, ``true``, ``w.npz``, ``{"a": [1, 2]}``: brackets and quotes inside it
  are balanced, so their commas do not end it) or quoted (``"a,b"``, ``'x)'``, backslash escapes);
* each value is typed by the pass's parameter kind (int, float, bool, str, choice, json);
* a named pipeline (``zero``) may stand for its passes, alone or among others;
* ``builtin:NAME`` is irviz's built-in pass NAME when a user's pass file took that name;
* the text may start with the target its passes run under, ended by a semicolon:
  ``target=x86-avx2; zero,CPUTileReductions``, ``target=cuda -arch=sm_86; gpu``,
  ``target={"kind": "llvm", "mcpu": "znver3"}; zero`` (any form ``--target`` takes; quote it if
  it holds a ``;``). Only there: a pipeline names at most one target.

:func:`parse_pipeline` gives a :class:`Pipeline` (a ``list[PassInvocation]`` whose ``target`` is
the text's target, None without one) and :func:`pipeline_text` writes it back:
``parse_pipeline(pipeline_text(invs)) == invs``, the target included. A mistake raises :class:`PipelineTextError`
naming the column and what would have been valid there.
"""
from __future__ import annotations

import json
import math
import re

from irviz.core.errors import PassError
from irviz.core.passes.named_pipelines import PIPELINES, get_pipeline
from irviz.core.passes.registry import BUILTIN_PREFIX, PassInvocation, coerce_param, find_pass, list_passes

__all__ = ["Pipeline", "PipelineTextError", "parse_pipeline", "pipeline_text"]

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
# a built-in a user pass shadows is written with its prefix: builtin:MatmulAddFuse
_PASS_NAME_RE = re.compile(re.escape(BUILTIN_PREFIX) + r"[A-Za-z_][A-Za-z0-9_.\-]*|" + _NAME_RE.pattern)
_BARE_RE = re.compile(r"[A-Za-z0-9_./:+\-~@%*]+")
_OPEN = {"(": ")", "[": "]", "{": "}"}
_TARGET_RE = re.compile(r"\s*target\s*=")
# a target written as it is: names, -key=value options, a JSON object (its quotes and brackets balance)
_BARE_TARGET_RE = re.compile(r"[^;'\"\s]([^;]*[^;\s])?")


class Pipeline(list):
    """PassInvocations, with the target the text named (None: it named none)."""

    def __init__(self, invocations=(), target: str | None = None):
        super().__init__(invocations)
        self.target = target


class PipelineTextError(PassError):
    """A pipeline text that does not parse; ``column`` is 1-based."""

    def __init__(self, text: str, column: int, what: str, hint: str | None = None):
        pointer = f"\n  {text}\n  {' ' * (column - 1)}^" if "\n" not in text else ""
        super().__init__(f"pipeline text, column {column}: {what}{pointer}", hint)
        self.text, self.column, self.what = text, column, what


def parse_pipeline(text: str) -> Pipeline:
    """A pipeline name or a pipeline text -> fresh PassInvocations (values typed)."""
    if not isinstance(text, str):
        raise PassError(f"a pipeline is a name or a text, got {type(text).__name__}")
    if text.strip() in PIPELINES:
        return Pipeline(get_pipeline(text.strip()))
    parser = _Parser(text)
    target = parser.target_clause()
    rest = text[parser.pos:].strip()
    if target is not None and rest in PIPELINES:
        return Pipeline(get_pipeline(rest), target)
    return Pipeline(parser.pipeline(), target)


def pipeline_text(invocations, target: str | None = None) -> str:
    """The text that parses back to `invocations` (None values are left out: they mean unset),
    starting with `target` (default: the Pipeline's own target) when there is one."""
    target = target if target is not None else getattr(invocations, "target", None)
    prefix = ""
    if target:
        target = str(target).strip()
        prefix = "target=" + (target if _BARE_TARGET_RE.fullmatch(target) and _balanced(target) else
                              '"' + target.replace("\\", "\\\\").replace('"', '\\"') + '"') + "; "
    parts = []
    for inv in invocations:
        name, params = (inv.name, inv.params) if isinstance(inv, PassInvocation) else \
            (inv["name"], inv.get("params"))
        spec = find_pass(name)
        kinds = {p.name: p.kind for p in spec.params} if spec is not None else {}
        args = [f"{k}={_format_value(v, kinds.get(k))}" for k, v in (params or {}).items() if v is not None]
        parts.append(name + (f"({','.join(args)})" if args else ""))
    return prefix + ",".join(parts)


def _balanced(text: str) -> bool:
    """Whether a bare target's brackets and quotes close, as the parser reads them."""
    try:
        p = _Parser(f"target={text};")
        return p.target_clause() == text and p.pos == len(p.text)
    except PipelineTextError:
        return False


def _format_value(value, kind: str | None) -> str:
    if kind == "json" or isinstance(value, (list, tuple, dict)):
        raw = json.dumps(value, separators=(",", ":"))
    elif isinstance(value, bool):
        return "true" if value else "false"
    elif isinstance(value, int):
        return str(value)
    elif isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    else:
        raw = str(value)
    if _BARE_RE.fullmatch(raw):
        return raw
    return '"' + raw.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    # -- helpers ----------------------------------------------------------------------------------
    def fail(self, what: str, hint: str | None = None, at: int | None = None):
        return PipelineTextError(self.text, (self.pos if at is None else at) + 1, what, hint)

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def name(self, what: str) -> tuple[str, int]:
        m = (_PASS_NAME_RE if what == "a pass name" else _NAME_RE).match(self.text, self.pos)
        if m is None:
            found = repr(self.peek()) if self.peek() else "the end"
            raise self.fail(f"expected {what}, found {found}", _known_hint() if what == "a pass name" else None)
        self.pos = m.end()
        return m.group(0), m.start()

    # -- grammar ----------------------------------------------------------------------------------
    def target_clause(self) -> str | None:
        """``target=T;`` at the start: T (the position after the ';'); None without one."""
        m = _TARGET_RE.match(self.text)
        if m is None:
            return None
        self.pos = m.end()
        self.skip_ws()
        start = self.pos
        if self.peek() in ("'", '"'):
            target = self.quoted(self.peek())
            self.skip_ws()
        else:
            stack: list[str] = []
            while self.pos < len(self.text) and (stack or self.text[self.pos] != ";"):
                c = self.text[self.pos]
                if c in ("'", '"'):
                    self.quoted(c)
                    continue
                if c in _OPEN:
                    stack.append(_OPEN[c])
                elif c in ")]}":
                    if not stack or c != stack[-1]:
                        raise self.fail(f"unbalanced {c!r} in the target")
                    stack.pop()
                self.pos += 1
            target = self.text[start:self.pos].strip()
        if self.peek() != ";":
            raise self.fail("expected ';' after the target, before the passes",
                            "write target=T; PASSES, e.g. target=x86-avx2; zero")
        if not target:
            raise self.fail("missing target after 'target='", "e.g. target=x86-avx2; zero", at=start)
        self.pos += 1
        return target

    def pipeline(self) -> list[PassInvocation]:
        out: list[PassInvocation] = []
        self.skip_ws()
        if not self.peek():
            raise self.fail("the pipeline is empty", _known_hint())
        while True:
            self.skip_ws()
            out.extend(self.item())
            self.skip_ws()
            ch = self.peek()
            if not ch:
                return out
            if ch == ",":
                self.pos += 1
                continue
            if ch == ")":
                raise self.fail("unbalanced ')': no '(' is open here")
            raise self.fail(f"expected ',' between passes, found {ch!r}")

    def item(self) -> list[PassInvocation]:
        name, start = self.name("a pass name")
        self.skip_ws()
        spec = find_pass(name)
        if spec is None and name == "target" and self.peek() == "=":
            raise self.fail("the target goes first, before the passes", "target=T; PASSES", at=start)
        if spec is None:
            if name in PIPELINES:
                if self.peek() == "(":
                    raise self.fail(f"the pipeline {name!r} takes no parameters")
                return get_pipeline(name)
            raise self.fail(f"unknown pass {name!r}", _known_hint(), at=start)
        params = self.params(spec) if self.peek() == "(" else {}
        return [PassInvocation(spec.name, params)]

    def params(self, spec) -> dict:
        opened = self.pos
        self.pos += 1
        out: dict = {}
        self.skip_ws()
        if self.peek() == ")":
            self.pos += 1
            return out
        valid = [p.name for p in spec.params]
        valid_hint = (f"{spec.name} takes: " + ", ".join(valid)) if valid else f"{spec.name} takes no parameters"
        while True:
            self.skip_ws()
            if not self.peek():
                raise self.fail(f"unbalanced '(' at column {opened + 1}: missing ')'")
            key, key_at = self.name("a parameter name")
            if key not in valid:
                raise self.fail(f"{spec.name} has no parameter {key!r}", valid_hint, at=key_at)
            if key in out:
                raise self.fail(f"{spec.name}: parameter {key!r} given twice", at=key_at)
            self.skip_ws()
            if self.peek() != "=":
                raise self.fail(f"expected '=' after {key}", f"write {key}=VALUE")
            self.pos += 1
            self.skip_ws()
            raw, raw_at = self.value(key)
            try:
                out[key] = coerce_param(spec, key, raw)
            except PassError as exc:
                raise self.fail(exc.message, exc.hint, at=raw_at) from None
            self.skip_ws()
            ch = self.peek()
            if ch == ",":
                self.pos += 1
                continue
            if ch == ")":
                self.pos += 1
                return out
            if not ch:
                raise self.fail(f"unbalanced '(' at column {opened + 1}: missing ')'")
            raise self.fail(f"expected ',' or ')' after {key}'s value, found {ch!r}")

    def value(self, key: str) -> tuple[str, int]:
        start = self.pos
        ch = self.peek()
        if ch in ("'", '"'):
            return self.quoted(ch), start
        stack: list[str] = []
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if c in ("'", '"'):
                self.quoted(c)
                continue
            if not stack and c in ",)":
                break
            if c in _OPEN:
                stack.append(_OPEN[c])
            elif c in ")]}":
                if c != stack[-1]:
                    raise self.fail(f"unbalanced {c!r} in the value of {key}")
                stack.pop()
            self.pos += 1
        if stack:
            raise self.fail(f"unbalanced brackets in the value of {key}: missing {stack[-1]!r}", at=start)
        raw = self.text[start:self.pos].rstrip()
        if not raw:
            raise self.fail(f"missing value for {key}", 'write key=VALUE; quote an empty string: key=""')
        return raw, start

    def quoted(self, quote: str) -> str:
        start = self.pos
        self.pos += 1
        chars = []
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if c == "\\" and self.pos + 1 < len(self.text):
                chars.append(self.text[self.pos + 1])
                self.pos += 2
                continue
            self.pos += 1
            if c == quote:
                return "".join(chars)
            chars.append(c)
        raise self.fail(f"unterminated string: the {quote} has no closing {quote}", at=start)


def _known_hint() -> str:
    return ("known pipelines: " + ", ".join(PIPELINES) + "; known passes: "
            + ", ".join(s.name for s in list_passes()))
