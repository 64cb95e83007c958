"""Generation over a static KV cache: prefill and decode programs built with TVM generate the same
tokens (and logits) as transformers' generate(do_sample=False)."""
import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from irviz.core.errors import IrvizError
from irviz.core.frontend import hf
from irviz.core.generate import generation as g
from irviz.core.generate import static_cache as sc
from irviz.core.generate.programs import open_programs
from irviz.core.tvm_compat import var_name

TOKENS = 32


def tiny_llama():
    # grouped-query attention (2 KV heads for 4 query heads), as Llama-family models have
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=96,
                                   initializer_range=0.1, bos_token_id=1, eos_token_id=2)
    return hf.build(transformers.LlamaForCausalLM, cfg, seed=0), hf.token_ids(128, seq=12, seed=1)


def tiny_gpt2():
    # GPT-2's default initialisation at this width repeats one token; larger weights vary the text
    cfg = transformers.GPT2Config(n_layer=2, n_embd=48, n_head=4, vocab_size=160, n_positions=96,
                                  initializer_range=0.3, bos_token_id=0, eos_token_id=0)
    return hf.build(transformers.GPT2LMHeadModel, cfg, seed=0), hf.token_ids(160, seq=12, seed=1)


def _generated(make):
    lm, prompt = make()
    progs = open_programs(lm, (prompt,), spec="test", tokens=TOKENS, pipeline="zero")
    gen = g.TvmGenerator(progs)
    tvm_tokens, tvm_logits = gen.generate(prompt.numpy(), TOKENS)
    torch_tokens, torch_logits = g.torch_generate(lm, prompt, TOKENS)
    return progs, g.compare_steps(tvm_tokens, torch_tokens, tvm_logits, torch_logits), tvm_tokens


@pytest.fixture(scope="module")
def llama():
    return _generated(tiny_llama)


@pytest.fixture(scope="module")
def gpt2():
    return _generated(tiny_gpt2)


@pytest.mark.parametrize("which", ["llama", "gpt2"])
def test_tvm_generates_the_tokens_and_logits_of_generate(which, request):
    progs, result, tokens = request.getfixturevalue(which)
    assert len(tokens) == TOKENS
    assert len(set(tokens)) > 3  # a text that varies, or matching would prove little
    assert result["tokens_match"], result["first_mismatch"]
    assert result["first_mismatch"] is None
    assert len(result["logits"]) == TOKENS
    assert result["logits_allclose"], result["logits_max_abs_error"]


def test_decode_takes_the_cache_and_a_position_and_returns_the_cache(llama):
    from tvm import tirx

    progs = llama[0]
    layout = progs.layout
    assert layout.layers == 2 and layout.shape == (1, 2, 12 + TOKENS, 12)
    assert layout.bytes == 2 * 2 * 1 * 2 * (12 + TOKENS) * 12 * 4
    main = progs.decode.session.module()["main"]
    names = [var_name(p) for p in main.params]
    assert names[:2 + layout.tensors] == ["token", "position"] + [f"cache_{i}" for i in range(layout.tensors)]
    out = main.ret_ty.fields
    assert len(out) == 1 + layout.tensors
    b, h, _, d = layout.shape
    assert [x.name if isinstance(x, tirx.Var) else int(x) for x in out[1].shape] == [b, h, "max_len", d]
    # one set of weights, taken by both programs
    assert progs.decode.weight_names() == progs.prefill.weight_names()
    assert set(progs.decode.weight_names()) == set(progs.params())


@pytest.mark.parametrize("which", ["prefill", "decode"])
def test_each_program_steps_through_the_pipeline_with_diffs(llama, which):
    session = llama[0].program(which).session
    assert [s.pass_name for s in session.steps][:2] == ["import", "LegalizeOps"]
    assert len(session.steps) == 6
    assert session.diff(0, 1)  # LegalizeOps turned the Relax ops into TensorIR kernels


def test_a_model_that_is_not_a_causal_lm_is_refused_naming_what_was_looked_for():
    with pytest.raises(sc.NotACausalLM) as e:
        open_programs(torch.nn.Linear(8, 8), (torch.zeros(1, 8, dtype=torch.long),), spec="linear")
    assert "not a causal language model" in e.value.message
    assert "AutoModelForCausalLM" in e.value.message and "Linear" in e.value.message


def test_an_encoder_is_refused_as_a_model_that_does_not_generate():
    cfg = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=64)
    bert = hf.encoder(transformers.BertModel, cfg)
    with pytest.raises(sc.NotACausalLM) as e:
        open_programs(bert, (hf.token_ids(64, seq=8),), spec="bert")
    assert "BertModel" in e.value.message and "do not generate" in e.value.message


def test_a_mismatch_names_the_first_differing_token_and_step():
    logits = [np.zeros(4, "float32") for _ in range(5)]
    result = g.compare_steps([3, 1, 2, 0, 0], [3, 1, 2, 1, 1], logits, logits)
    assert not result["tokens_match"]
    assert result["first_mismatch"] == {"step": 3, "tvm": 0, "torch": 1}
    assert len(result["logits"]) == 4  # compared up to the first differing token
    msg = g.mismatch_message(dict(result, prompt_len=10))
    assert "token 3" in msg and "TVM 0" in msg and "torch generate 1" in msg and "decode step 3" in msg


def test_what_a_program_computes_from_its_weights_alone_is_lifted_out_and_run_once():
    import tvm
    from tvm import relax
    from tvm.script import ir as I
    from tvm.script import relax as R

    from irviz.core.backend.build import build
    from irviz.core.generate.programs import TRANSFORM_PARAMS, lift_weight_transforms

    @I.ir_module
    class Linear:
        @R.function
        def main(x: R.Tensor((1, 4), "float32"), w: R.Tensor((8, 4), "float32")):
            with R.dataflow():
                wt = R.permute_dims(w)  # the weight's transpose depends on the weight alone
                y = R.matmul(x, wt)
                R.output(y)
            return y

    mod, lifted = lift_weight_transforms(Linear, inputs=1)
    assert lifted and TRANSFORM_PARAMS in [g.name_hint for g in mod.get_global_vars()]
    vm = relax.VirtualMachine(build(mod).executable, tvm.cpu())
    rng = np.random.default_rng(0)
    x, w = rng.random((1, 4), "float32"), rng.random((8, 4), "float32")
    packed = vm[TRANSFORM_PARAMS]([tvm.runtime.tensor(w)])
    np.testing.assert_allclose(vm["main"](tvm.runtime.tensor(x), *packed).numpy(), x @ w.T, rtol=1e-5)
    # nothing to lift: the module as it was
    assert lift_weight_transforms(Linear, inputs=2) == (Linear, False)


def _cache_lengths(program):
    """The length axis of each cache tensor main takes and returns."""
    main = program.session.module()["main"]
    params = [p for p in main.params[:program.inputs] if var_name(p).startswith("cache")]
    return [p.ty.shape.values[2] for p in params] + [f.shape.values[2] for f in main.ret_ty.fields[1:]]


@pytest.mark.parametrize("which", ["llama", "gpt2"])
def test_the_cache_length_is_one_symbolic_size_of_both_programs(which, request):
    from tvm import tirx

    progs = request.getfixturevalue(which)[0]
    assert progs.context_length == "symbolic" and progs.context_reason is None
    for program in (progs.prefill, progs.decode):
        lengths = _cache_lengths(program)
        assert all(isinstance(n, tirx.Var) and n.name == "max_len" for n in lengths), lengths
    assert progs.dims() == {"max_len": progs.layout.max_len}
    assert progs.dims(100) == {"max_len": 100}
    # no upper bound: TVM would plan every buffer sized by the length at that bound
    for program in (progs.prefill, progs.decode):
        attrs = program.session.steps[0].mod["main"].attrs
        bounds = dict(attrs.get("tir_var_upper_bound") or {}) if attrs is not None else {}
        assert "max_len" not in {str(k) for k in bounds}, bounds


@pytest.mark.parametrize("which", ["llama", "gpt2"])
def test_one_build_generates_the_tokens_of_generate_at_two_max_lengths(which, request):
    progs, _, tokens = request.getfixturevalue(which)
    built = (progs.prefill.built, progs.decode.built)
    lm, prompt = progs.lm, progs.prompt
    want = g.torch_generate(lm, prompt, TOKENS)[0]
    assert tokens == want  # at the length opened with (prompt + TOKENS)
    for max_len in (progs.layout.max_len + 5, 3 * progs.layout.max_len):
        gen = g.TvmGenerator(progs, max_len=max_len)
        assert (progs.prefill.built, progs.decode.built) == built  # not built again
        _, cache = gen.prefill(prompt.numpy())
        assert cache[0].shape[2] == max_len
        assert gen.generate(prompt.numpy(), TOKENS)[0] == want
    with pytest.raises(IrvizError, match="no room"):
        g.TvmGenerator(progs, max_len=int(prompt.shape[1]))


def test_where_the_symbolic_capture_fails_the_length_is_a_constant_that_says_why(monkeypatch):
    from torch.export import Dim

    def too_small(name, layout):  # a range the example length is outside of: torch.export refuses it
        d = Dim("max_len", min=2, max=4)
        cache = tuple({2: d} for _ in range(layout.tensors))
        return (None, cache) if name == "prefill" else (None, None, cache)

    monkeypatch.setattr(sc, "dynamic_shapes", too_small)
    lm, prompt = tiny_llama()
    progs = open_programs(lm, (prompt,), spec="test", tokens=6, pipeline="zero")
    assert progs.context_length == 18 and "symbolic context length failed" in progs.context_reason
    assert [int(n) for n in _cache_lengths(progs.decode)] == [18] * 8
    assert progs.dims() == {}
    with pytest.raises(IrvizError, match="constant"):
        g.TvmGenerator(progs, max_len=30)
    gen = g.TvmGenerator(progs)
    assert gen.generate(prompt.numpy(), 6)[0] == g.torch_generate(lm, prompt, 6)[0]


def _cache_reads(main) -> list:
    """The length axis of each strided_slice in `main` that cuts a max_len-long axis 2 shorter."""
    from tvm import relax, tirx

    op, found = relax.op.strided_slice(relax.Var("x", relax.TensorType((1,), "float32")), [0], [0], [1]).op, []

    def visit(e):
        if isinstance(e, relax.Call) and e.op.same_as(op) and len(e.ty.shape.values) == 4:
            before, after = e.args[0].ty.shape.values[2], e.ty.shape.values[2]
            if isinstance(before, tirx.Var) and before.name == "max_len" and not after.same_as(before):
                found.append(after)

    relax.analysis.post_order_visit(main.body, visit)
    return found


def test_decode_attends_over_the_filled_positions_only(llama):
    from tvm import tirx

    progs, _, tokens = llama
    assert progs.decode_reads == "used" and progs.decode_reason is None
    reads = _cache_reads(progs.decode.session.steps[0].mod["main"])
    assert len(reads) == progs.layout.tensors  # each key and value tensor, sliced for attention
    # position + 1: a size read from the position's value, neither max_len nor min(.., max_len)
    for r in reads:
        assert isinstance(r, tirx.Add), reads
        var, one = (r.a, r.b) if isinstance(r.a, tirx.Var) else (r.b, r.a)
        assert isinstance(var, tirx.Var) and var.name != "max_len" and int(one) == 1, reads
    assert not _cache_reads(progs.prefill.session.steps[0].mod["main"])
    assert tokens == g.torch_generate(progs.lm, progs.prompt, TOKENS)[0]


def test_where_tvm_cannot_fuse_the_filled_part_decode_reads_the_whole_cache(monkeypatch):
    from irviz.core.generate import inbound_slice

    # TVM's own slice converter types the read min(position + 1, max_len), which FuseOps cannot take
    monkeypatch.setattr(inbound_slice, "CONVERTERS", {})
    lm, prompt = tiny_llama()
    progs = open_programs(lm, (prompt,), spec="test", tokens=6, pipeline="zero")
    assert progs.context_length == "symbolic"
    assert progs.decode_reads == "all" and "if_then_else" in progs.decode_reason
    assert not _cache_reads(progs.decode.session.steps[0].mod["main"])
    gen = g.TvmGenerator(progs, max_len=25)
    assert gen.generate(prompt.numpy(), 6)[0] == g.torch_generate(lm, prompt, 6)[0]
