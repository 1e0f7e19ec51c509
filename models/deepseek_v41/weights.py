"""The parameters of a DeepSeek-V4.1 text model: names (transformers'
DeepseekV41ForCausalLM state-dict names), shapes, and the random init the
generator uses. Linear weights are [out, in] like torch.nn.Linear.
"""


def tensors(cfg):
    """Yield (name, shape, init) for every parameter prefill reads, in a fixed
    order. `init` names the random distribution generate.py draws from."""
    d, v, hc = cfg["hidden_size"], cfg["vocab_size"], cfg["hc_mult"]
    h, hd, qlr = cfg["num_attention_heads"], cfg["head_dim"], cfg["q_lora_rank"]
    g, r_o = cfg["o_groups"], cfg["o_lora_rank"]
    hi, di = cfg["index_n_heads"], cfg["index_head_dim"]
    e, inter = cfg["n_routed_experts"], cfg["moe_intermediate_size"]
    mix = (2 + hc) * hc
    yield "model.embed.weight", [v, d], "unit"
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        if i in cfg["engram_layer_ids"]:
            li = cfg["engram_layer_ids"].index(i)
            ncols = (cfg["engram_max_ngram_size"] - 1) * cfg["engram_n_heads"]
            ehd = cfg["engram_head_dim"]
            yield p + "engram.embed.weight", [cfg["engram_num_embeddings"][li], ehd], "unit"
            yield p + "engram.wkv.weight", [d * (hc + 1), ncols * ehd], "linear"
            yield p + "engram.q_weight", [hc, d], "one"
            yield p + "engram.k_weight", [hc, d], "one"
        for site in ("attn", "ffn"):
            yield p + f"hc_{site}_fn", [mix, hc * d], "linear"
            yield p + f"hc_{site}_base", [mix], "bias"
            yield p + f"hc_{site}_scale", [3], "one"
        yield p + "attn_norm.weight", [d], "one"
        a = p + "attn."
        yield a + "wq_a.weight", [qlr, d], "linear"
        yield a + "q_norm.weight", [qlr], "one"
        yield a + "wq_b.weight", [h * hd, qlr], "linear"
        yield a + "wkv.weight", [hd, d], "linear"
        yield a + "kv_norm.weight", [hd], "one"
        yield a + "wo_a.weight", [g * r_o, h * hd // g], "linear"
        yield a + "wo_b.weight", [d, g * r_o], "linear"
        yield a + "attn_sink", [h], "bias"
        ratio = cfg["compress_ratios"][i]
        if i in cfg["kv_source_layer_ids"]:
            yield a + "compressor.wkv.weight", [hd, d], "linear"
            if ratio > 1:
                yield a + "compressor.wgate.weight", [hd, d], "linear"
            yield a + "compressor.norm.weight", [hd], "one"
        if i in cfg["index_source_layer_ids"]:
            yield a + "indexer.wq_b.weight", [hi * di, qlr], "linear"
            yield a + "indexer.weights_proj.weight", [hi, d], "linear"
            if i in cfg["kv_source_layer_ids"]:
                yield a + "indexer.wk.weight", [di, hd], "linear"
                yield a + "indexer.k_norm.weight", [di], "one"
        yield p + "ffn_norm.weight", [d], "one"
        f = p + "ffn."
        yield f + "gate.weight", [e, d], "linear"
        yield f + "gate.bias", [e], "small"
        for x in [f"experts.{k}." for k in range(e)] + ["shared_experts."]:
            yield f + x + "w1.weight", [inter, d], "linear"
            yield f + x + "w2.weight", [d, inter], "linear"
            yield f + x + "w3.weight", [inter, d], "linear"
    yield "model.norm.weight", [d], "one"
    yield "lm_head.weight", [v, d], "linear"
