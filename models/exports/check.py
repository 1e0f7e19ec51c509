#!/usr/bin/env python3
"""Runs the real-export matrix (export.py's output) through h20 and prints it.

For every OUT/<arch>.<dtype>.<setting>.onnx: what the raising found
(`h20-opt --emit=attn`: attn.attention / attn.rope / attn.rms_norm counts),
then, per target in --targets, compile (`h20-opt --target=T`), run at every
S of the references (`h20-run --dump-logits`) and compare all positions with

  float32 exports:  PyTorch float32 logits, relative L2 <= --tol-f32
                    (default 1e-4 on the CPU, 1e-3 on a GPU)
  16-bit exports:   PyTorch logits in the weights' dtype, relative L2 <= 2e-2
                    and the same next token (last position's argmax)

and, for 16-bit exports, also the distance from PyTorch float32 on the same
(rounded) weights beside PyTorch's own. Writes --json (the matrix) and prints
a table; exits 1 when a cell fails, 2 on bad arguments.

  check.py DIR --h20 build/bin [--targets cpu,h200] [--only REGEX] [--json out.json]
           [--device gpu] [--work DIR] [--no-compile]
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import time

import numpy as np


def rel_l2(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def run(cmd, timeout=1800):
    t = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout, time.time() - t


def raised_counts(h20, onnx):
    rc, out, _ = run([os.path.join(h20, "h20-opt"), onnx, "--emit=attn"])
    if rc != 0:
        return {"error": last_error(out)}
    return {k: len(re.findall(r"\battn\.%s\b" % k, out)) for k in ("attention", "rope", "rms_norm")}


def last_error(text):
    lines = [l for l in text.splitlines() if "error" in l.lower()]
    return (lines[0] if lines else text.strip().splitlines()[-1] if text.strip() else "")[:400]


def check_cell(a, onnx, target):
    base = os.path.basename(onnx)[:-5]
    arch, dtype, setting = base.split(".")
    stem = os.path.join(os.path.dirname(onnx), f"{arch}.{dtype}")
    art = os.path.join(a.work, f"{base}.{target}.h20")
    cell = {"target": target}
    # GPU: compute in the export's own dtype (the target's default is bf16).
    ctype = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}[dtype]
    opts = [] if target == "cpu" else ["--max-positions=4096", f"--compute-type={ctype}"]
    if a.no_compile:
        # Artifacts compiled elsewhere (the GPU machine has no compiler).
        rc, out, secs = (0, "", 0.0) if os.path.exists(art) else (1, "error: no artifact " + art, 0.0)
    else:
        rc, out, secs = run([os.path.join(a.h20, "h20-opt"), onnx, f"--target={target}", "-o", art] + opts)
    cell["compile_s"] = round(secs, 1)
    if rc != 0:
        cell["status"] = "compile-failed"
        cell["error"] = last_error(out)
        return cell
    notes = [l for l in out.splitlines() if "warning" in l.lower() or "remark" in l.lower()]
    if notes:
        cell["notes"] = notes[:5]
    if target != "cpu" and a.device != "gpu":
        cell["status"] = "compiled"
        return cell
    cell["runs"] = {}
    ok = True
    for ids in sorted(glob.glob(stem + ".ids*.npy")):
        S = ids.split(".ids")[1][:-4]
        got_path = os.path.join(a.work, f"{base}.{target}.{S}.npy")
        dev = "cpu" if target == "cpu" else "gpu"
        rc, out, secs = run([os.path.join(a.h20, "h20-run"), art, "--ids", ids, "--device", dev,
                             "--dump-logits", got_path, "--weights-dir", os.path.dirname(onnx)])
        if rc != 0:
            cell["runs"][S] = {"error": last_error(out)}
            ok = False
            continue
        got = np.load(got_path)
        ref = np.load(f"{stem}.ref{S}.npy")
        r = {"rel_l2": rel_l2(got, ref),
             "same_next": bool(np.argmax(got.reshape(-1, got.shape[-1])[-1]) ==
                               np.argmax(ref.reshape(-1, ref.shape[-1])[-1]))}
        if dtype == "float32":
            tol = a.tol_f32 if a.tol_f32 else (1e-4 if target == "cpu" else 1e-3)
            r["pass"] = r["rel_l2"] <= tol
        else:
            ref32 = np.load(f"{stem}.ref32_{S}.npy")
            r["h20_vs_f32"] = rel_l2(got, ref32)
            r["torch_vs_f32"] = rel_l2(ref, ref32)
            r["pass"] = r["rel_l2"] <= 2e-2 and r["same_next"]
        ok = ok and r["pass"]
        cell["runs"][S] = r
    cell["status"] = "pass" if ok and cell["runs"] else "fail"
    return cell


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--h20", default="", help="folder with h20-opt and h20-run (default: PATH)")
    ap.add_argument("--targets", default="cpu")
    ap.add_argument("--only", default="")
    ap.add_argument("--json")
    ap.add_argument("--device", default="cpu", help="gpu: run GPU-target artifacts too")
    ap.add_argument("--tol-f32", type=float, default=0.0)
    ap.add_argument("--work", default="")
    ap.add_argument("--no-compile", action="store_true",
                    help="run the artifacts already in --work (compiled on another machine)")
    a = ap.parse_args()
    if not a.h20:
        import shutil
        found = shutil.which("h20-run")
        if not found:
            print("check.py: h20-run is not on PATH (give --h20 DIR)", file=sys.stderr)
            return 2
        a.h20 = os.path.dirname(found)
    models = sorted(glob.glob(os.path.join(a.dir, "*.onnx")))
    if a.only:
        models = [m for m in models if re.search(a.only, os.path.basename(m))]
    if not models:
        print(f"check.py: no .onnx files in '{a.dir}' (matching '{a.only}')", file=sys.stderr)
        return 2
    a.work = a.work or os.path.join(os.environ.get("TMPDIR", "/tmp"), "h20-exports-check")
    os.makedirs(a.work, exist_ok=True)
    matrix = {}
    failed = 0
    for m in models:
        base = os.path.basename(m)[:-5]
        entry = {"raised": {} if a.no_compile else raised_counts(a.h20, m)}
        for t in a.targets.split(","):
            c = check_cell(a, m, t)
            entry[t] = c
            failed += c["status"] not in ("pass", "compiled")
            worst = max((r.get("rel_l2", float("inf")) for r in c.get("runs", {}).values()), default=None)
            print(f"{base} {t} {c['status']} raised={entry['raised']} "
                  f"worst_rel_l2={worst if worst is None else f'{worst:.2e}'} "
                  f"{c.get('error', '')}", flush=True)
        matrix[base] = entry
    if a.json:
        tmp = a.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(matrix, f, indent=1)
        os.replace(tmp, a.json)
    print(f"{len(models) * len(a.targets.split(',')) - failed} of "
          f"{len(models) * len(a.targets.split(','))} cells pass")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
