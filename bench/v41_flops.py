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
            rows, k = (const(d) for d in sizes(s, 0))
            n = const(sizes(s, 4)[1])
            f["experts_fp4"] += 2.0 * n * k * rows * share / C * S
        elif s["kernel"].startswith("h20_sparse_attn"):
            q, idx = sizes(s, 0), sizes(s, 4)
            w = s["args"][7]["i64"]
            picks = const(idx[1]) if s["kernel"].endswith("_c") else 0
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
