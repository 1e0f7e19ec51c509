"""FLOPs of a DeepSeek-V4.1 GPU program, by kind: the FLOP floor's numerator.

Input: the program JSON that `artifact-info ART --program` prints. Used by
bench/v41-flash-deep.sh (one GPU) and bench/v41-project.py (one rank of an
8-GPU program). Counting rules (issue 30 / 32):
  GEMM steps        2 m n k per token (batch included), FP8 and bf16 apart
  MXFP4 experts     2 N K per routed row (top-k rows per token); on a rank of
                    an expert-parallel program the rows buffer holds every
                    routed row, of which the rank's experts get 1 / ranks on
                    average (uniform routing: an expectation, not a count)
  sparse attention  4 H D (window + picks) per query row
  indexer           2 Hi Di per scored (query, entry) pair: every visible
                    entry, or within candidates the candidate blocks' entries
A step's rows are one chunk's (C tokens); a rank whose attention is split by
query rows holds q rows of each chunk, so its attention and indexer count
q / C of the S queries.
"""

import json
import os


def const(e):
    """A size's constant part (sizes may be {"c": .., "rank": ..} terms)."""
    return e if isinstance(e, int) else e.get("c", 0)


def sizes(s, i):
    return s["args"][i]["memref"]["sizes"]


def expert_share(prog):
    """Expected share of the routed rows that a rank's experts get."""
    par = prog.get("parallel") or {}
    if (par.get("split") or {}).get("expert_blocks", 0) > 0:
        return 1.0 / max(1, par.get("tensor_parallel", 1))
    return 1.0


def flops(prog, S):
    """FLOPs of one S-token prefill of `prog` by kind (see the module doc)."""
    g = prog["gpu"]
    C = g["chunking"]["chunk"] if g.get("chunking") else S
    share = expert_share(prog)
    f = {"gemm_bf16": 0.0, "gemm_fp8": 0.0, "experts_fp4": 0.0, "attention": 0.0, "indexer": 0.0}
    for s in g["steps"]:
        if s["op"] == "gemm":
            per_row = 2.0 * const(s["batch"]) * const(s["n"]) * const(s["k"]) * const(s["m"]) / C
            f["gemm_fp8" if s["dtype_a"].startswith("float8") else "gemm_bf16"] += per_row * S
        elif s["op"] != "launch":
            continue
        elif s["kernel"].startswith("h20_moe_fp4_gemm"):
            # (A, Wq, Ws, offsets, C); the FP8 form (Aq, As, Wq, Ws, offsets, C)
            rows, k = (const(d) for d in sizes(s, 0))
            n = const(sizes(s, 5 if "_fp8" in s["kernel"] else 4)[1])
            f["experts_fp4"] += 2.0 * n * k * rows * share / C * S
        elif s["kernel"].startswith("h20_sparse_attn"):
            q, idx = sizes(s, 0), sizes(s, 4)
            w = s["args"][7]["i64"]
            # h20_sparse_attn_<dt>_s<dt>_d<D>_{c,w}[_wg]: "c" attends picks
            picks = const(idx[1]) if "c" in s["kernel"].split("_")[6:] else 0
            f["attention"] += 4.0 * const(q[1]) * const(q[2]) * (w + picks) * S * const(q[0]) / C
        elif s["kernel"].startswith("h20_indexer"):
            q = sizes(s, 0)
            hd = 2.0 * const(q[1]) * const(q[2]) * const(q[0]) / C
            if "_m1_" in s["kernel"]:  # within candidate blocks
                cand, block = sizes(s, 3), s["args"][7]["i64"]
                f["indexer"] += hd * const(cand[1]) * block * S
            else:  # every visible entry: sum over queries of (i + 1) / ratio
                ratio = s["args"][6]["i64"]
                f["indexer"] += hd * S * (S + 1) / (2.0 * ratio)
    return f


KINDS = ("gemm_bf16", "gemm_fp8", "experts_fp4", "attention", "indexer", "memory_bound", "other")


def kind_of(s):
    """The kind of a program step, as flops() and model_ms() count it."""
    if s["op"] == "gemm":
        return "gemm_fp8" if s["dtype_a"].startswith("float8") else "gemm_bf16"
    if s["op"] != "launch":
        return "other"
    k = s["kernel"]
    if k.startswith("h20_moe_fp4_gemm"):
        return "experts_fp4"
    if k.startswith("h20_sparse_attn"):
        return "attention"
    if k.startswith("h20_indexer"):
        return "indexer"
    if k.startswith("h20_main_kernel"):
        return "memory_bound"
    return "other"


def launch_bytes(prog, s):
    """Bytes a generated (memory-bound) kernel moves, a model: every memref
    operand once at its constant (chunk-local) size, a weight's at most the
    size of the largest other operand (a gather reads the rows it needs)."""
    bufs = prog["gpu"]["buffers"]
    width = {"float32": 4, "int64": 8, "int32": 4, "bfloat16": 2, "float16": 2, "int8": 1,
             "uint8": 1, "float8_e4m3fn": 1, "bool": 1}
    ops = []
    for a in s["args"]:
        m = a.get("memref")
        if not m:
            continue
        n = 1
        for d in m["sizes"]:
            n *= max(const(d), 1)
        b = bufs[m["buffer"]] if m["buffer"] < len(bufs) else {}
        ops.append((n * width.get(b.get("dtype"), 2), b.get("kind") == "weight"))
    act = max((n for n, w in ops if not w), default=0)
    return sum(min(n, act) if w and act else n for n, w in ops)


def model_ms(prog, S, rates):
    """The cost model's time per kind for one S-token prefill of `prog`:
    flops() of each V4.1 kernel kind at the rate h20's cost model assumes on
    the target (`rates`: h20-predict-prefill's kernel_rates entry, i.e.
    v41KernelRates in PrefillCostModel.h), the generated kernels'
    launch_bytes() at its memory rate. bf16 GEMMs and the other steps are
    not priced here (None)."""
    f = flops(prog, S)
    g = prog["gpu"]
    C = g["chunking"]["chunk"] if g.get("chunking") else S
    mem = sum(launch_bytes(prog, s) for s in g["steps"] if kind_of(s) == "memory_bound") * S / C

    def at(x, tflops):
        return x / (tflops * 1e12) * 1e3 if tflops else None

    return {"gemm_bf16": None, "gemm_fp8": at(f["gemm_fp8"], rates.get("fp8_gemm_tflops")),
            "experts_fp4": at(f["experts_fp4"], rates.get("fp4_experts_tflops")),
            "attention": at(f["attention"], rates.get("sparse_attention_tflops")),
            "indexer": at(f["indexer"], rates.get("indexer_tflops")),
            "memory_bound": mem / (rates["memory_gbytes_per_s"] * 1e9) * 1e3
            if rates.get("memory_gbytes_per_s") else None,
            "other": None}


def measured_ms(prog, profile):
    """A --profile-steps report's step times summed by kind_of()."""
    steps = prog["gpu"]["steps"]
    out = dict.fromkeys(KINDS, 0.0)
    for p in profile["step_profile"]["steps"]:
        i = p.get("step")
        if i is not None and i < len(steps):
            out[kind_of(steps[i])] += p.get("ms", 0.0)
    return out


def model_table(prog, S, profile, rates, target):
    """Markdown: measured ms beside the cost model's, per kind."""
    m, p = measured_ms(prog, profile), model_ms(prog, S, rates)
    lines = [f"Measured (--profile-steps) beside h20's cost model for {target} "
             "(v41KernelRates; a model, not a measurement), by kind:", "",
             "| kind | measured ms | model ms | measured / model |", "| --- | --- | --- | --- |"]
    for k in KINDS:
        mm, pp = m[k], p[k]
        lines.append(f"| {k} | {mm:.0f} | " + (f"{pp:.0f} | {mm / pp:.2f}" if pp else "n/a | n/a") + " |")
    return "\n".join(lines)


def target_of(gpu_name):
    """h20's target name for an nvidia-smi GPU name (None if not a Hopper it knows)."""
    n = gpu_name.upper()
    for t in ("H200", "H100", "H800", "H20"):
        if t in n:
            return t.lower()
    return None


def rates_for(path, gpu_name):
    """(target, kernel rates) from a cost-model.json that h20-predict-prefill
    wrote (kernel_rates), for this GPU; (None, None) when unavailable."""
    t = target_of(gpu_name or "")
    if not t or not os.path.exists(path):
        return None, None
    rates = json.load(open(path)).get("kernel_rates", {}).get(t)
    return (t, rates) if rates else (None, None)
