"""DeepSeek-V2-Lite's shape on the meta device: 15.7 B parameters (63 GB in float32).

Mixture of experts with multi-head latent attention. Published sizes: hidden 2048, 27 layers
(the first dense, MLP 10944), 16 heads, KV compressed to rank 512, q/k head 128 + 64 rotary,
v head 128; 64 routed experts of MLP 1408, 6 per token, 2 shared; vocab 102400; YaRN rope
scaling (factor 40). Tokens (1, 128) -> logits. Needs transformers.
"""
import torch

from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.DeepseekV2Config(
        vocab_size=102400, hidden_size=2048, intermediate_size=10944, moe_intermediate_size=1408,
        num_hidden_layers=27, num_attention_heads=16, num_key_value_heads=16,
        n_shared_experts=2, n_routed_experts=64, num_experts_per_tok=6, first_k_dense_replace=1,
        kv_lora_rank=512, q_lora_rank=None, qk_nope_head_dim=128, qk_rope_head_dim=64,
        v_head_dim=128, topk_method="greedy", n_group=1, topk_group=1,
        routed_scaling_factor=1.0, norm_topk_prob=False, max_position_embeddings=163840,
        rope_theta=10000.0, rope_scaling={
            "type": "yarn", "rope_type": "yarn", "factor": 40.0,
            "original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1,
            "mscale": 0.707, "mscale_all_dim": 0.707},
        rms_norm_eps=1e-6, tie_word_embeddings=False)
    with torch.device("meta"):
        model = hf.causal_lm(transformers.DeepseekV2ForCausalLM, cfg)
    return model, (hf.token_ids(cfg.vocab_size, seq=128),)
