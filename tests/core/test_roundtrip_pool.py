"""The forked step-file checks of an export: each answer is what its child saw, and a child that
hangs or fails is never taken as an answer."""
import os
import signal
import time

import pytest

from irviz.core.export import roundtrip_pool
from irviz.core.export.roundtrip_pool import RoundtripPool

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="forked checks need os.fork")


def _check(path, mod):
    """Stands in for roundtrip_check: answers from the file's content, records where it ran."""
    text = open(path).read()
    if text == "hang" and os.getpid() != mod:
        time.sleep(60)
    if text == "crash" and os.getpid() != mod:
        os.kill(os.getpid(), signal.SIGSEGV)
    if text == "raise" and os.getpid() != mod:
        raise RuntimeError("only in the child")
    return (text.startswith("ok"), text == "ok equal", f"{text} checked in {os.getpid()}")


def _files(tmp_path, texts):
    paths = []
    for k, t in enumerate(texts):
        p = tmp_path / f"step_{k}.py"
        p.write_text(t)
        paths.append(p)
    return paths


def test_children_answer_in_order_of_keys_not_of_finishing(tmp_path):
    texts = ["ok equal", "ok", "bad", "ok equal", "bad"]
    pool = RoundtripPool(_check, workers=2)
    me = os.getpid()
    for k, p in enumerate(_files(tmp_path, texts)):
        pool.submit(k, p, me)
    got = pool.results()
    assert sorted(got) == list(range(len(texts)))
    for k, t in enumerate(texts):
        loads, equal, note = got[k]
        assert (loads, equal) == (t.startswith("ok"), t == "ok equal")
        assert note.startswith(t) and not note.endswith(f" {me}"), "checked in a child"
    assert pool.forked == len(texts) and pool.rechecked == 0


def test_one_core_checks_in_this_process(tmp_path, monkeypatch):
    monkeypatch.setattr(roundtrip_pool, "usable_cores", lambda: 1)
    pool = RoundtripPool(_check)
    (p,) = _files(tmp_path, ["ok"])
    pool.submit(0, p, os.getpid())
    assert pool.results()[0][2].endswith(f" {os.getpid()}")
    assert pool.forked == 0


def test_a_child_that_hangs_is_killed_and_its_file_checked_here(tmp_path, monkeypatch):
    monkeypatch.setattr(roundtrip_pool, "_timeout_for", lambda path: 1.0)
    pool = RoundtripPool(_check, workers=2)
    p_hang, p_ok = _files(tmp_path, ["hang", "ok"])
    t = time.monotonic()
    pool.submit("hang", p_hang, os.getpid())
    pool.submit("ok", p_ok, os.getpid())
    got = pool.results()
    assert time.monotonic() - t < 30
    assert got["hang"] == (False, False, f"hang checked in {os.getpid()}")
    assert got["ok"][0] is True
    assert pool.rechecked == 1


def test_a_child_that_raises_is_checked_again_here(tmp_path):
    pool = RoundtripPool(_check, workers=2)
    (p,) = _files(tmp_path, ["raise"])
    pool.submit(0, p, os.getpid())
    assert pool.results()[0] == (False, False, f"raise checked in {os.getpid()}")
    assert pool.rechecked == 1


def test_a_crash_in_the_parser_is_reported_not_repeated_here(tmp_path):
    pool = RoundtripPool(_check, workers=2)
    (p,) = _files(tmp_path, ["crash"])
    pool.submit(0, p, os.getpid())
    loads, equal, note = pool.results()[0]
    assert (loads, equal) == (False, False)
    assert "SIGSEGV" in note
    assert pool.rechecked == 0
