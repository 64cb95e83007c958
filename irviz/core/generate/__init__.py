"""Generation with a KV cache: a causal LM as two programs, prefill and decode, sharing weights.

    static_cache  the torch side: find the causal LM, wrap it so the cache is explicit inputs and
                  outputs (prefill: prompt -> logits + cache; decode: token, position, cache ->
                  logits + cache), and greedy generation in torch eager over those wrappers
    programs      capture, import and build both programs through irviz's usual path
    generation    greedy generation in TVM against model.generate(do_sample=False), timed
    estimate      the same without weights: per-kernel estimates and the bandwidth limit
"""
