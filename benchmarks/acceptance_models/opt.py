"""A small OPT causal LM from transformers (2 layers, width 64), as a user would write it."""
import torch
import transformers


def get_model():
    torch.manual_seed(0)
    cfg = transformers.OPTConfig(vocab_size=512, hidden_size=64, num_hidden_layers=2, ffn_dim=128,
                                 num_attention_heads=4, max_position_embeddings=64,
                                 word_embed_proj_dim=64)
    model = transformers.OPTForCausalLM(cfg).eval()
    return model, (torch.randint(0, 512, (1, 24)),)
