"""Pipeline text: parsing, typing values by the pass's parameter kinds, errors with a column,
and pipeline_text writing back what parses to the same invocations."""
from __future__ import annotations

import pytest

from irviz.core.passes import (PassInvocation, PassParam, PassSpec, PipelineTextError, get_pipeline,
                               parse_pipeline, pipeline_text, register_pass, unregister_pass)


@pytest.fixture
def typed_pass():
    """A pass with one parameter of every kind (make is never called here)."""
    spec = PassSpec(
        name="TextKinds", description="every parameter kind", make=lambda **_: None,
        params=[PassParam("n", "int", 1, ""), PassParam("x", "float", 0.5, ""),
                PassParam("on", "bool", False, ""), PassParam("s", "str", "", ""),
                PassParam("c", "choice", 2, "", choices=[1, 2, 3]), PassParam("j", "json", None, "")])
    register_pass(spec)
    yield spec
    unregister_pass(spec.name)


def test_the_issue_example_parses_with_typed_values():
    invs = parse_pipeline("BindParams(params=w.npz),LegalizeOps,LibraryDispatch(min_macs=0),FuseOps,FuseTIR")
    assert [i.name for i in invs] == ["BindParams", "LegalizeOps", "LibraryDispatch", "FuseOps", "FuseTIR"]
    assert invs[0].params == {"params": "w.npz"}
    assert invs[2].params == {"min_macs": 0} and isinstance(invs[2].params["min_macs"], int)
    assert invs[1].params == {} and invs[4].params == {}


def test_every_kind_is_typed(typed_pass):
    (inv,) = parse_pipeline('TextKinds( n = -3 , x=1e-3, on=TRUE, s="a, (b)", c=3, j={"k": [1, 2], "s": "x,y"})')
    assert inv.params == {"n": -3, "x": 0.001, "on": True, "s": "a, (b)", "c": 3,
                          "j": {"k": [1, 2], "s": "x,y"}}
    assert type(inv.params["c"]) is int


def test_a_name_is_a_pipeline_and_pipelines_expand_inside_a_text():
    assert parse_pipeline("zero") == get_pipeline("zero")
    invs = parse_pipeline("LibraryDispatch(min_macs=0), zero")
    assert [i.name for i in invs] == ["LibraryDispatch", *[i.name for i in get_pipeline("zero")]]


@pytest.mark.parametrize("invs", [
    [PassInvocation("LegalizeOps", {"skip_ops": "relax.nn.conv2d,relax.matmul", "enable_warning": True})],
    [PassInvocation("BindParams", {"params": "/tmp/with space/w (1).npz", "func_name": "main"}),
     PassInvocation("FuseOps", {"fuse_opt_level": 0}), PassInvocation("FuseTIR", {})],
    [PassInvocation("LibraryDispatch", {"ops": "matmul", "min_macs": 0, "keep_tileable_conv": False})],
    [PassInvocation("LegalizeOps", {"skip_ops": 'quote " and back\\slash'})],
    [PassInvocation("LegalizeOps", {"skip_ops": ""})],
])
def test_round_trip(invs):
    text = pipeline_text(invs)
    assert parse_pipeline(text) == invs
    assert pipeline_text(parse_pipeline(text)) == text


def test_round_trip_every_kind(typed_pass):
    inv = PassInvocation("TextKinds", {"n": 7, "x": 2.5, "on": True, "s": "a,b)", "c": 1,
                                       "j": {"a": [1, "x,y"]}})
    assert parse_pipeline(pipeline_text([inv])) == [inv]


def test_text_is_short_and_readable():
    assert pipeline_text(get_pipeline("zero")) == "LegalizeOps,AnnotateTIROpPattern,FoldConstant,FuseOps,FuseTIR"
    assert pipeline_text([PassInvocation("LibraryDispatch", {"min_macs": 0})]) == "LibraryDispatch(min_macs=0)"


@pytest.mark.parametrize("text, column, words, hint_words", [
    ("LegalizeOps,Frobnicate", 13, "unknown pass 'Frobnicate'", ["FuseTIR", "zero"]),
    ("FuseOps(level=1)", 9, "FuseOps has no parameter 'level'", ["fuse_opt_level"]),
    ("FuseOps(fuse_opt_level=high)", 24, "must be an integer", []),
    ("LegalizeOps(enable_warning=maybe)", 28, "must be true/false", []),
    ("FuseOps(fuse_opt_level=1", 25, "unbalanced '(' at column 8", []),
    ("LegalizeOps),FuseTIR", 12, "unbalanced ')'", []),
    ('LegalizeOps(skip_ops="a,b)', 22, "unterminated string", []),
    ("LegalizeOps,", 13, "expected a pass name", []),
    ("FuseOps(fuse_opt_level=)", 24, "missing value for fuse_opt_level", []),
    ("FuseOps(fuse_opt_level 1)", 24, "expected '='", []),
    ("LegalizeOps FuseTIR", 13, "expected ',' between passes", []),
    ("zero(x=1)", 5, "takes no parameters", []),
    ("", 1, "empty", []),
])
def test_errors_name_the_column(text, column, words, hint_words):
    with pytest.raises(PipelineTextError) as ei:
        parse_pipeline(text)
    err = ei.value
    assert err.column == column, err.message
    assert words in err.message
    assert f"column {column}" in err.message
    for w in hint_words:
        assert w in (err.hint or "")
    if text:  # a caret under the column
        lines = err.message.splitlines()
        assert lines[-1].index("^") - 2 == column - 1 and lines[-2].strip() == text.strip()


# -- the target at the start of a text


@pytest.mark.parametrize("text, target", [
    ("target=x86-avx2; zero,CPUTileReductions", "x86-avx2"),
    ("target=cuda -arch=sm_86; gpu", "cuda -arch=sm_86"),
    ('target={"kind": "llvm", "mcpu": "znver3"}; LegalizeOps', '{"kind": "llvm", "mcpu": "znver3"}'),
    ("  target = aarch64 ;zero", "aarch64"),
    ("target='a;b'; LegalizeOps", "a;b"),
])
def test_a_text_may_name_its_target_first_and_round_trips(text, target):
    invs = parse_pipeline(text)
    assert invs.target == target
    rest = text.split(";")[-1].strip()
    assert invs == parse_pipeline(rest)  # the passes are the same as without the target
    again = parse_pipeline(pipeline_text(invs))
    assert again == invs and again.target == target
    assert pipeline_text(invs).startswith("target=")


def test_without_a_target_the_text_is_unchanged_and_names_none():
    invs = parse_pipeline("LegalizeOps,FuseOps")
    assert invs.target is None and pipeline_text(invs) == "LegalizeOps,FuseOps"
    assert pipeline_text(invs, "aarch64") == "target=aarch64; LegalizeOps,FuseOps"
    assert parse_pipeline("zero").target is None


@pytest.mark.parametrize("text, column, what", [
    ("target=x86-avx2 zero", 21, "expected ';' after the target"),
    ("LegalizeOps,target=cuda; zero", 13, "the target goes first"),
    ("target=; zero", 8, "missing target"),
    ("target=aarch64;", 16, "the pipeline is empty"),
    ('target={"kind": "llvm"]; zero', 23, "unbalanced ']'"),
])
def test_a_misplaced_or_unfinished_target_names_the_column(text, column, what):
    with pytest.raises(PipelineTextError) as info:
        parse_pipeline(text)
    assert info.value.column == column and what in info.value.what
