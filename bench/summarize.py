#!/usr/bin/env python3
"""Issue 7: merges bench/run-bench.sh's raw results into one record and the
BENCHMARKS.md tables.

  summarize.py DIR [DIR ...] [--record OUT.json] [--markdown OUT.md]
               [--update BENCHMARKS.md]

DIR: results of run-bench.sh (BUNDLE/results/bench, or what came back in
$OUT/bench); several DIRs are merged, a file in a later one replacing the
same file of an earlier one (e.g. one device command for S = 32K and 128K,
one for 512K). Or a merged record (issue7.json) in place of a DIR.
--record writes the merged record (commit it as bench/results/issue7-h200.json);
--markdown writes the tables; --update replaces the part of BENCHMARKS.md
between "<!-- issue7-begin -->" and "<!-- issue7-end -->" with them.
Without an output option the tables go to stdout. Needs only the standard
library; nothing is invented: a number that was not measured is shown as
"not measured".
"""
import argparse
import glob
import json
import os
import re
import sys

BEGIN, END = "<!-- issue7-begin -->", "<!-- issue7-end -->"
NA = "not measured"


def load(path):
    with open(path) as f:
        return json.load(f)


def collect(dirs):
    files = {}
    for d in dirs:
        for p in sorted(glob.glob(os.path.join(d, "*.json"))):
            files[os.path.basename(p)] = p
    return files


def merge(dirs):
    """The record: every number with where it came from."""
    if len(dirs) == 1 and os.path.isfile(dirs[0]):
        return load(dirs[0])
    files = collect(dirs)
    get = lambda name: load(files[name]) if name in files else None  # noqa: E731
    rec = {
        "what": "issue 7 benchmarks (bench/run-bench.sh): A attention alone, B seed-dense "
                "TTFT vs PyTorch and the FLOP floor, C the cost model's prediction",
        "build": get("build-info.json"),
        "machine": [load(files[n]) for n in sorted(files) if n.startswith("env-")],
        "torch_env": get("torch-env.json"),
    }
    layout = get("model-layout.json")
    if layout:
        rec["model"] = layout["config"]

    # A: attention alone.
    h20 = get("attn-h20.json") or []
    torch_rows = get("attn-torch.json") or []
    attn = {}
    for r in h20:
        if "tflops" not in r:
            continue
        e = attn.setdefault(r["S"], {"S": r["S"]})
        # --kernels all: the mma.sync kernel and the wgmma one (what h20
        # compiles to where it has a variant), one row each.
        e.setdefault("h20_kernels", []).append(dict(r))
    for r in torch_rows:
        e = attn.setdefault(r["S"], {"S": r["S"]})
        e[r["impl"]] = r
    # h20's output at the shape against SDPA on the same inputs (attn_check_torch.py).
    for r in get("attn-check-torch.json") or []:
        attn.setdefault(r["S"], {"S": r["S"]})["vs_sdpa"] = r
    for e in attn.values():
        for r in e.get("h20_kernels", []):
            for base in ("cudnn", "flash2"):
                if "tflops" in e.get(base, {}):
                    r[f"over_{base}"] = r["tflops"] / e[base]["tflops"]
    rec["attention"] = [attn[S] for S in sorted(attn)]

    # B: TTFT.
    gemm = get("gemm-peak.json")
    rec["gemm_peak"] = gemm
    peak = gemm["peak_tflops"] if gemm else None
    ttft = {}
    for n, p in files.items():
        m = re.match(r"ttft-h20-S(\d+)\.report\.json$", n)
        if m:
            ttft.setdefault(int(m[1]), {"S": int(m[1])})["h20"] = load(p)
        m = re.match(r"ttft-torch-S(\d+)\.json$", n)
        if m:
            ttft.setdefault(int(m[1]), {"S": int(m[1])})["pytorch"] = load(p)
        m = re.match(r"ttft-h20fp8-S(\d+)\.report\.json$", n)
        if m:
            ttft.setdefault(int(m[1]), {"S": int(m[1])})["h20_fp8"] = load(p)
        m = re.match(r"ttft-torch-compile-S(\d+)\.json$", n)
        if m:
            ttft.setdefault(int(m[1]), {"S": int(m[1])})["compile"] = load(p)
    for S, e in ttft.items():
        pt = e.get("pytorch", {})
        flops = pt.get("flops") or (flops_of(rec["model"], S) if "model" in rec else None)
        e["flops"] = flops
        if flops and peak:
            e["floor_ms"] = flops["total"] / (peak * 1e12) * 1e3
            e["floor_basis"] = f"FLOPs / {peak:.1f} TFLOP/s (torch.matmul bf16, same run)"
        h = e.get("h20", {})
        if "ttft_ms" in h and "floor_ms" in e:
            e["h20_over_floor"] = h["ttft_ms"] / e["floor_ms"]
        if "ttft_ms" in h and "ttft_ms" in pt:
            e["h20_over_pytorch"] = h["ttft_ms"] / pt["ttft_ms"]
        if "ttft_ms" in pt and "floor_ms" in e:
            e["pytorch_over_floor"] = pt["ttft_ms"] / e["floor_ms"]
        tc = e.get("compile", {})
        if "ttft_ms" in h and "ttft_ms" in tc:
            e["h20_over_compile"] = h["ttft_ms"] / tc["ttft_ms"]
        f8 = e.get("h20_fp8", {})
        if "ttft_ms" in f8 and "floor_ms" in e:
            e["h20_fp8_over_floor"] = f8["ttft_ms"] / e["floor_ms"]
        if "ttft_ms" in f8 and "ttft_ms" in h:
            e["h20_fp8_over_bf16"] = f8["ttft_ms"] / h["ttft_ms"]
    rec["ttft"] = [ttft[S] for S in sorted(ttft)]

    # C: the cost model (not a measurement).
    pred = []
    for n, p in files.items():
        m = re.match(r"predicted-S(\d+)\.json$", n)
        if m:
            pred.append(load(p))
    rec["predicted"] = sorted(pred, key=lambda r: r["seq_len"])
    return rec


def flops_of(cfg, S):
    h, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg.get("head_dim", h // nh)
    f, L, V = cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    linear = L * S * 2 * (h * nh * d + 2 * h * nkv * d + nh * d * h + 3 * h * f) + 2 * h * V
    attention = L * 4.0 * S * S * d * nh / 2
    return {"linear": float(linear), "attention": attention, "total": linear + attention}


def k(S):
    return f"{S // 1024}K" if S % 1024 == 0 else str(S)


def num(x, fmt="{:.1f}"):
    return NA if x is None else fmt.format(x)


def gib(b):
    return None if b is None else b / 2**30


def ratio(x):
    return NA if x is None else f"{x:.2f}x"


def tables(rec):
    out = []
    b = rec.get("build") or {}
    machine = (rec.get("machine") or [{}])[-1]
    te = rec.get("torch_env") or {}
    gpu = te.get("gpu") or machine.get("nvidia_smi", "?")
    commit = f"{b.get('commit', '?')}{' (uncommitted changes)' if b.get('dirty') else ''}"
    if rec.get("machine") or te:
        out.append(f"GPU: {gpu} ({machine.get('nvidia_smi', '')}); PyTorch {te.get('torch', '?')}, "
                   f"CUDA {te.get('cuda', '?')}, cuDNN {te.get('cudnn', '?')}; h20 commit {commit}; "
                   f"run {machine.get('date', '?')}.")
    else:
        out.append(f"No GPU run recorded yet: A and B are not measured. C (no GPU needed) from "
                   f"h20 commit {commit}, {b.get('bundled', '?')}.")
    out.append("")
    out.append("**A. Attention alone** (causal, bf16, B = 1, H = 32, D = 128; TFLOP/s of "
               "4·S²·D·H/2 FLOPs; CUDA events, warm-up, median of ≥ 5; same run, same GPU; speed "
               "ratios: > 1 means h20 is faster; h20_attention_wgmma_* is the kernel h20 compiles "
               "to (f16/bf16, D = Dv in 64/128/256), h20_attention_* the mma.sync kernel kept for "
               "other shapes and h20-opt --attention-kernel=mma)")
    out.append("")
    out.append("| S | h20 kernel | h20 ms | h20 TFLOP/s | cuDNN TFLOP/s | FA2 TFLOP/s | h20 / cuDNN (speed) | h20 / FA2 (speed) | h20 vs SDPA, same inputs (rel. L2) |")
    out.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for e in rec.get("attention", []):
        c, f = e.get("cudnn", {}), e.get("flash2", {})
        vs = e.get("vs_sdpa")
        for h in e.get("h20_kernels") or [{}]:
            # The dump (--dump) is of the wgmma kernel, h20's choice for the shape.
            check = NA
            if vs and "wgmma" in h.get("kernel", ""):
                check = f"{vs['rel_l2']:.2e} ({vs['backend']}, {'PASS' if vs['pass'] else 'FAIL'})"
            out.append(f"| {k(e['S'])} | {h.get('kernel', NA)} | {num(h.get('ms'), '{:.2f}')} | "
                       f"{num(h.get('tflops'))} | {num(c.get('tflops')) if 'error' not in c else 'error'} | "
                       f"{num(f.get('tflops')) if 'error' not in f else 'error'} | "
                       f"{ratio(h.get('over_cudnn'))} | {ratio(h.get('over_flash2'))} | {check} |")
    if not rec.get("attention"):
        out.append(f"| {NA} | | | | | | | | |")
    out.append("")
    gp = rec.get("gemm_peak") or {}
    cfg = rec.get("model") or {}
    out.append(f"**B. seed-dense TTFT** ({cfg.get('num_hidden_layers', 8)} layers, DESIGN.md §2; bf16, "
               "last-position logits; h20: chunked prefill, ids on host to logits on host after a "
               "warm-up chunk; PyTorch: models/llama/reference.py on the same weights, SDPA cuDNN, "
               "cuBLAS, same run; torch.compile: the same reference with every layer through "
               "TorchInductor, SDPA's default backend, after a compiling warm-up; floor = FLOPs / "
               + (f"{gp['peak_tflops']:.1f} TFLOP/s, " if gp.get("peak_tflops") else "")
               + "the best large bf16 torch.matmul of the run; "
               "time ratios: > 1 means h20 is slower; peak memory: h20's includes its KV cache, "
               "64 GiB at 512K, PyTorch's reference keeps none)")
    out.append("")
    out.append("| S | FLOPs | floor (ms) | h20 TTFT (ms) | h20 / floor | PyTorch (ms) | h20 / PyTorch | "
               "torch.compile (ms) | h20 / torch.compile | "
               "h20 peak (GiB) | PyTorch peak (GiB) | rel. L2 vs PyTorch | same next token | runs h20 / PyTorch |")
    out.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for e in rec.get("ttft", []):
        h, p = e.get("h20", {}), e.get("pytorch", {})
        tc = e.get("compile", {})
        tc_ms = NA if not tc else (num(tc.get("ttft_ms")) if "error" not in tc else tc["error"][:40])
        cmp = p.get("vs_h20", {})
        fl = (e.get("flops") or {}).get("total")
        same = NA if "same_next_token" not in cmp else ("yes" if cmp["same_next_token"] else
                                                         f"no ({cmp.get('h20_next_token_id')} vs {p.get('next_token_id')})")
        out.append(f"| {k(e['S'])} | {num(fl, '{:.3g}')} | {num(e.get('floor_ms'), '{:.0f}')} | "
                   f"{num(h.get('ttft_ms'))} | {ratio(e.get('h20_over_floor'))} | "
                   f"{num(p.get('ttft_ms')) if 'error' not in p else p['error'][:40]} | "
                   f"{ratio(e.get('h20_over_pytorch'))} | {tc_ms} | {ratio(e.get('h20_over_compile'))} | "
                   f"{num(gib(h.get('peak_gpu_memory_bytes')))} | "
                   f"{num(gib(p.get('peak_gpu_memory_bytes')))} | {num(cmp.get('rel_l2'), '{:.2e}')} | {same} | "
                   f"{len(h.get('ttft_runs_ms') or ([1] if 'ttft_ms' in h else []))} / "
                   f"{len(p.get('runs_ms') or [])} |")
    if not rec.get("ttft"):
        out.append(f"| {NA} | | | | | | | | | | | | | |")
    out.append("")
    fp8 = [e for e in rec.get("ttft", []) if e.get("h20_fp8")]
    if fp8:
        out.append("**B, FP8 linears** (issue 33: the same model and runs, `h20-opt "
                   "--quantize-linears=fp8`: weights per 128 x 128 block quantised on load, "
                   "inputs per 1 x 128 on the fly, block-scaled cuBLASLt FP8 GEMMs; attention and "
                   "the LM head bf16; floor: the bf16 one above)")
        out.append("")
        out.append("| S | h20 FP8 linears (ms) | / bf16 floor | / h20 bf16 | rel. L2 vs PyTorch bf16 | "
                   "same next token |")
        out.append("| --- | --- | --- | --- | --- | --- |")
        for e in fp8:
            c = e.get("pytorch", {}).get("vs_h20_fp8", {})
            same = NA if "same_next_token" not in c else ("yes" if c["same_next_token"] else "no")
            out.append(f"| {k(e['S'])} | {num(e['h20_fp8'].get('ttft_ms'))} | "
                       f"{ratio(e.get('h20_fp8_over_floor'))} | {ratio(e.get('h20_fp8_over_bf16'))} | "
                       f"{num(c.get('rel_l2'), '{:.2e}')} | {same} |")
        out.append("")
    out.append("**C. Predicted TTFT — h20's cost model, not a measurement** (`h20-opt --h20-predict-prefill`, "
               "TileCostModel.h: the FlashAttention-3-style kernel the tile model assumes, GEMM and "
               "memory-bound estimates from datasheet rates; N GPUs: context parallelism, ring K/V "
               "transfers over NVLink overlapped with attention)")
    out.append("")
    out.append("| S | FLOPs | 1x H20 (s) | 8x H20 (s) | 1x H200 (s) | 8x H200 (s) | measured h20, 1x H200 (s, B) |")
    out.append("| --- | --- | --- | --- | --- | --- | --- |")
    measured = {e["S"]: e.get("h20", {}).get("ttft_ms") for e in rec.get("ttft", [])}
    for p in rec.get("predicted", []):
        by = {(q["target"], q["gpus"]): q.get("predicted_ms") for q in p["predictions"]}
        s = lambda key: num(None if by.get(key) is None else by[key] / 1e3, "{:.3g}")  # noqa: E731
        m = measured.get(p["seq_len"])
        out.append(f"| {k(p['seq_len'])} | {p['flops']['total']:.3g} | {s(('h20', 1))} | {s(('h20', 8))} | "
                   f"{s(('h200', 1))} | {s(('h200', 8))} | {num(None if m is None else m / 1e3, '{:.2f}')} |")
    if not rec.get("predicted"):
        out.append(f"| {NA} | | | | | | |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--record")
    ap.add_argument("--markdown")
    ap.add_argument("--update")
    a = ap.parse_args()
    rec = merge(a.dirs)
    md = tables(rec)
    if a.record:
        with open(a.record + ".tmp", "w") as f:
            json.dump(rec, f, indent=1)
        os.replace(a.record + ".tmp", a.record)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(md)
    if a.update:
        text = open(a.update).read()
        i, j = text.find(BEGIN), text.find(END)
        if i < 0 or j < i:
            print(f"summarize.py: {a.update} has no {BEGIN} ... {END} block", file=sys.stderr)
            return 1
        text = text[:i + len(BEGIN)] + "\n" + md + text[j:]
        with open(a.update + ".tmp", "w") as f:
            f.write(text)
        os.replace(a.update + ".tmp", a.update)
    if not (a.record or a.markdown or a.update):
        sys.stdout.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
