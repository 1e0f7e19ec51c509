#!/usr/bin/env bash
# Issue 30 (b): how accurate DeepSeek-V4.1 is with its weights kept FP8 /
# FP4 on the GPU, as DeepSeek's checkpoints store them (FP8 e4m3 linears
# with 128 x 128 block scales, MXFP4 routed experts), against
# models/deepseek_v41/reference.py (float32 numpy, the weights dequantised
# exactly) on the same checkpoint, beside the bf16 prefill of the same
# checkpoint dequantised (the baseline: bf16 activations, as every other
# bf16 case today).
#
# Models:
#   tiny-qat (configs/tiny-qat.json: every layer kind, Engram, head_dim 64,
#     so the KV / compressed-KV / indexer fake quantisation is on), an
#     FP8 checkpoint with MXFP4 experts (generate.py --quantize
#     fp8-fp4-experts), made and exported on the build machine with its
#     references at S = 8, 129, 1000 (models/v41-qat-fp4: export.py
#     --fp4-experts; fp8/: --fp8-linears --fp4-experts; deq/: everything
#     dequantised on export). Artifacts art/v41-qat-fp4.MODE.h20, MODE:
#       f32, bf16      the experts MXFP4 (dequantised in the grouped
#                      GEMM's load path), the linears widened on export
#       fp8-bf16       the linears FP8 too: block-scaled FP8 GEMMs, their
#                      inputs quantised per 1 x 128 block (DeepSeek's way)
#       fp8-deqgemm    the linears FP8 in memory, each dequantised for a
#                      bf16 GEMM (h20-opt --fp8-gemm=dequantize)
#       fp8-deqf32     the same in f32: the FP8 / FP4 storage alone
#       deq-bf16       the dequantised export in bf16: the baseline
#   flash-e16 (configs/flash-e16.json: V4.1-Flash's shapes, 4 layers, one
#     of each attention kind, the routed experts cut to 16, top-6, so that
#     reference.py holds its 17 GB of float32 weights). Its 6.7 GB
#     checkpoint is too big to carry: the artifacts are compiled here from
#     export.py --graph-only --fp8-linears --fp4-experts
#     (models/v41-acc-flash/model.onnx), and the GPU machine generates the
#     checkpoint from the config (generate.py --quantize fp8-fp4-experts
#     --jobs N: N processes, the bytes of one), exports it with the same
#     flags, checks that the export lays its weights out as the graph-only
#     one did (models/deepseek_v41/check_layout.py: names, types, shapes,
#     byte ranges and the graph; h20-run itself checks only the file size;
#     the values need not match here's, only the export and the reference
#     there must read one checkpoint), runs reference.py's model on it
#     (weights decoded in threads, one process for every S, every top-k
#     decision's margin recorded), and h20-run with --weights-dir on that
#     export. S = 129; at 1000 reference.py's attention and
#     output-projection einsums (numpy's own loops, not BLAS: ~580 G
#     multiply-adds at ~4.5 G/s here) would add an estimated 2-3 minutes,
#     so H20_ACC_FLASH_S="129 1000" opts in. Artifacts
#     art/v41-acc-flash.MODE.h20: fp8 (FP8 GEMMs), deqgemm (the baseline:
#     the FP8 linears dequantised to bf16 for each GEMM, the MXFP4 experts
#     in the GEMM's load path: the bf16 weights a dequantised export would
#     have, without a second 7 GB export), deqf32 (the same in f32).
#
# Bounds (status column; the run exits 1 on a FAIL or a run that failed):
# a result within its bound with the same next token is PASS; past it,
# INFO while within a looser bound (the next token required in f32, not
# in bf16), FAIL beyond. f32 (tiny-qat f32, fp8-deqf32; flash deqf32):
# 1e-4 (1e-3 at Flash widths), loose 1e-1: the FP8 / FP4 fake
# quantisation has roundings within 1e-7 of a midpoint on every tiny-qat
# prompt (reference.py --quant-margins), so any other float32 order
# flips some, and tiny-qat's top-k choices carry the flips on: h20's CPU
# target (exact weights) lands 6.6e-7 / 1.0e-4 / 1.0e-2 at S = 8 / 129 /
# 1000; bugs simulated in reference.py (one layer's expert scales x2,
# output-projection rows reversed, a layer's routed experts dropped, the
# KV fake quantisation skipped) land 0.18-0.37. bf16: 2e-2 (tiny-all-picks'
# gate; FP8 GEMMs 1e-1, as gpu-test.sh gates FP8 activations), loose 0.8:
# tiny-qat's near-tie top-k choices flip under any bf16 rounding
# (bf16_sensitivity.py: 0.27-0.36 from float32, the next token the same
# at only 59-100% of positions), as far as the simulated bugs; 0.8 is
# still below unrelated logits (1.4), so only a gross error fails there,
# and the f32 modes are the check of the weight formats.
#
# Usage:
#   bench/v41-accuracy.sh compile BUNDLE   # build machine (h20-opt, python3 with numpy + onnx):
#                                          # the models, artifacts and scripts above into BUNDLE
#                                          # (H20_ACC_FLASH=0: tiny-qat alone, as gpu-bundle.sh
#                                          # makes it for gpu-test.sh)
#   bench/v41-accuracy.sh pack [DIR]       # compile into a fresh bundle and write DIR (default
#                                          # device/acc)/acc.tar.xz and DIR/COMMAND: the one line
#                                          # that runs it on a GPU machine beside the base bundle
#                                          # (bin/h20-run, lib/: H20_ACC_BASE, default
#                                          # device/g12a/base.tar.xz)
#   BUNDLE/bench/v41-accuracy.sh run BUNDLE   # GPU machine (python3 with numpy + onnx)
# To try the run without a GPU: H20_ACC_TARGET=cpu H20_ACC_FLASH_CONFIG=tiny-chunked
# bench/v41-accuracy.sh compile B, B/bin -> build/bin, then run B (CPU
# artifacts: every mode exact float32; a tiny config in the Flash role).
# Time: the run keeps within H20_ACC_BUDGET_S (default 540: one 600 s
# device call), the Flash checkpoint, export and reference within that
# less 2 minutes (H20_ACC_FLASH_PREPARE_S), while tiny-qat runs on the GPU;
# about 3-4 minutes expected on a 16-core H100 / H200 machine (estimated
# from this 2-core machine's timings; not yet run there).
# Results: H20_BENCH_RESULTS, else $OUT/v41-accuracy when OUT is set, else
# /tmp/h20-bench/results: v41-accuracy.md (the table, printed last),
# v41-accuracy.json, v41-accuracy.log. The Flash checkpoint, exports and
# logits go to H20_ACC_WORK (default /tmp/v41-acc; ~15 GB), removed at the
# end unless H20_ACC_KEEP=1.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mode=${1:?usage: v41-accuracy.sh compile BUNDLE | pack [DIR] | run BUNDLE}
flash_sizes=${H20_ACC_FLASH_S:-129}
tiny_sizes="8 129 1000"
# The tiny-qat modes: artifact mode, the export it reads (subdirectory of
# models/v41-qat-fp4), compute type, more h20-opt flags.
tiny_modes=("f32::f32" "bf16::bf16" "fp8-bf16:fp8:bf16" "fp8-deqgemm:fp8:bf16:--fp8-gemm=dequantize"
            "fp8-deqf32:fp8:f32:--fp8-gemm=dequantize" "deq-bf16:deq:bf16")
flash_modes=("fp8::bf16" "deqgemm::bf16:--fp8-gemm=dequantize" "deqf32::f32:--fp8-gemm=dequantize")

if [[ $mode == compile || $mode == pack ]]; then
  root=$(cd "$here/.." && pwd)
  bin=${H20_BUILD_DIR:-$root/build}/bin
  # A Python with onnx and numpy (Debian's when the first on PATH has not).
  py=${PYTHON:-python3}
  [[ -n ${PYTHON:-} ]] || "$py" -c "import onnx, numpy" 2>/dev/null || py=/usr/bin/python3
  v41=$root/models/deepseek_v41
fi

if [[ $mode == pack ]]; then
  dest=$(realpath -m "${2:-$root/device/acc}")
  base=${H20_ACC_BASE:-$root/device/g12a/base.tar.xz}
  [[ -f $base ]] || { echo "v41-accuracy: no base bundle $base (H20_ACC_BASE)" >&2; exit 2; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  "$0" compile "$work/b" || exit 1
  # The base's runtime must read what this h20-opt writes: its own
  # artifact-info (the runtime's artifact and step-program parser and
  # validator) on every artifact, here, before any device time is spent.
  tar -xJf "$base" -C "$work" bin/artifact-info lib || exit 1
  for a in "$work"/b/art/*.h20; do
    LD_LIBRARY_PATH=$work/lib "$work/bin/artifact-info" "$a" --program >/dev/null 2>"$work/info.err" ||
      { echo "v41-accuracy: $base's runtime cannot read $(basename "$a"):" >&2; cat "$work/info.err" >&2; exit 1; }
  done
  mkdir -p "$dest"
  (cd "$work/b" && tar -cf - art bench models) | xz -T2 -6 >"$dest/acc.tar.xz.tmp" &&
    mv "$dest/acc.tar.xz.tmp" "$dest/acc.tar.xz" || exit 1
  rel_base=$(realpath --relative-to="$root" "$base")
  rel_acc=$(realpath --relative-to="$root" "$dest/acc.tar.xz")
  cmd="mkdir -p /tmp/b && for p in $rel_base $rel_acc; do xz -dc \$p | tar -x -C /tmp/b || exit 1; done && bash /tmp/b/bench/v41-accuracy.sh run /tmp/b"
  printf '%s\n' "$cmd" >"$dest/COMMAND"
  printf 'carry: %s %s\n' "$rel_base" "$rel_acc" >>"$dest/COMMAND"
  echo "v41-accuracy: $(du -b "$dest/acc.tar.xz" | cut -f1) bytes in $dest/acc.tar.xz" \
    "(+ $(du -b "$base" | cut -f1) of $rel_base)"
  cat "$dest/COMMAND"
  exit 0
fi

if [[ $mode == compile ]]; then
  bundle=${2:?usage: v41-accuracy.sh compile BUNDLE}
  mkdir -p "$bundle/art" "$bundle/bench" "$bundle/models"
  log=$bundle/art/v41-accuracy-compile.log
  : >"$log"
  # art NAME ONNX COMPUTE [H20-OPT ARGS...]: gpu-bundle.sh's v41_art (h200:
  # sm_90, any Hopper; prompts up to 1024 tokens; one chunk).
  # H20_ACC_TARGET=cpu: CPU artifacts instead (exact float32, the compute
  # type and GPU flags ignored), to try the whole run without a GPU.
  target=${H20_ACC_TARGET:-h200}
  cpu=()
  [[ $target == cpu ]] && cpu=(--cpu-opt-level=0)
  art() {
    local name=$1 onnx=$2 ct=$3
    shift 3
    echo "== $name" >>"$log"
    "$bin/h20-opt" "$onnx" --target="$target" "${cpu[@]}" --compute-type="$ct" --max-positions=1024 \
      --quiet "$@" -o "$bundle/art/$name.h20" >>"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  }
  # tiny-qat: checkpoint, its three exports, ids and references with
  # their quant margins at each S (as gpu-bundle.sh's v41_model), then the
  # artifacts; the checkpoint itself is dropped.
  m=$bundle/models/v41-qat-fp4
  rm -rf "$m"
  mkdir -p "$m"
  "$py" "$v41/generate.py" tiny-qat "$m/ckpt" --quantize fp8-fp4-experts --ids $tiny_sizes >/dev/null &&
    "$py" "$v41/export.py" "$m/ckpt" "$m" --fp4-experts >/dev/null &&
    "$py" "$v41/export.py" "$m/ckpt" "$m/fp8" --fp8-linears --fp4-experts >/dev/null &&
    "$py" "$v41/export.py" "$m/ckpt" "$m/deq" >/dev/null || exit 1
  for S in $tiny_sizes; do
    cp "$m/ckpt/ids-$S.npy" "$m/"
    "$py" "$v41/reference.py" "$m/ckpt" "$m/ids-$S.npy" "$m/ref-$S.npy" \
      --quant-margins "$m/quant-$S.json" >/dev/null || exit 1
  done
  rm -rf "$m/ckpt"
  for spec in "${tiny_modes[@]}"; do
    IFS=: read -r a sub ct flags <<<"$spec"
    art "v41-qat-fp4.$a" "$m${sub:+/$sub}/model.onnx" "$ct" $flags
  done
  # flash-e16 (H20_ACC_FLASH_CONFIG: another config, e.g. tiny-chunked to
  # try the run quickly; one without Engram, whose token map a graph-only
  # export lacks): the graph alone (its data file is a sparse hole, not
  # kept) and the config's name for the run.
  f=$bundle/models/v41-acc-flash
  rm -rf "$f"
  if [[ ${H20_ACC_FLASH:-1} != 0 ]]; then
    "$py" "$v41/export.py" --graph-only "${H20_ACC_FLASH_CONFIG:-flash-e16}" "$f" --fp8-linears \
      --fp4-experts >/dev/null || exit 1
    echo "${H20_ACC_FLASH_CONFIG:-flash-e16}" >"$f/config"
    for spec in "${flash_modes[@]}"; do
      IFS=: read -r a sub ct flags <<<"$spec"
      art "v41-acc-flash.$a" "$f/model.onnx" "$ct" $flags
    done
    rm -f "$f/model.onnx.data"
  fi
  # The scripts the run needs: this one, and the generator, exporter,
  # reference and layout check of the same commit.
  cp "$0" "$bundle/bench/"
  mkdir -p "$bundle/models/deepseek_v41/configs"
  cp "$v41"/*.py "$bundle/models/deepseek_v41/"
  cp "$v41"/configs/*.json "$bundle/models/deepseek_v41/configs/"
  commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
  dirty=false
  [[ -n $(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null) ]] && dirty=true
  printf '{"commit": "%s", "dirty": %s, "compiled": "%s", "h20_opt_md5": "%s"}\n' "$commit" "$dirty" \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(md5sum <"$bin/h20-opt" | cut -d' ' -f1)" >"$bundle/bench/v41-accuracy-build.json"
  exit 0
fi

# flash-prepare BUNDLE WORK (run's background step): the Flash checkpoint,
# its export and layout check, and the reference logits; each long step
# in the background so that a TERM from run's time limit ends it.
if [[ $mode == flash-prepare ]]; then
  bundle=$2 work=$3
  v41=$bundle/models/deepseek_v41
  cfg=$(cat "$bundle/models/v41-acc-flash/config")
  trap 'kill $(jobs -p) 2>/dev/null; exit 124' TERM
  jobs=$(nproc)
  ((jobs > 16)) && jobs=16
  t0=$(date +%s)
  # generate.py forks its workers; they need no BLAS, so none of its
  # threads are started to be forked (Python 3.12 warns of that).
  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python3 "$v41/generate.py" "$cfg" "$work/ckpt" \
    --quantize fp8-fp4-experts --ids $flash_sizes --jobs "$jobs" &
  wait $! || { echo "flash-prepare: generate.py failed" >&2; exit 1; }
  t1=$(date +%s)
  cp "$work"/ckpt/ids-*.npy "$work/"
  echo "flash-prepare: checkpoint in $((t1 - t0)) s ($(du -sh "$work/ckpt" | cut -f1))"
  # The export and the reference read the same checkpoint at once.
  python3 "$v41/export.py" "$work/ckpt" "$work/onnx" --fp8-linears --fp4-experts >/dev/null &
  export_pid=$!
  python3 - "$v41" "$work" $flash_sizes <<'PY' &
import concurrent.futures as cf
import json
import os
import sys
import time

import numpy as np

v41, work, sizes = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3:]]
sys.path.insert(0, v41)
import reference  # noqa: E402
import weights  # noqa: E402

t0 = time.time()
m = reference.load_model(os.path.join(work, "ckpt"))
# reference.py decodes each weight when first used, one at a time (about
# 2 minutes for flash-e16 on one core); the same decoding (Model.w) for
# all of them first, in threads (numpy drops the GIL in its loops: 1.7x
# on 2 cores).
names = [n for n, _, _ in weights.tensors(m.cfg)]
with cf.ThreadPoolExecutor(min(16, os.cpu_count() or 1)) as ex:
    list(ex.map(m.w, names))
out = {"decode_s": round(time.time() - t0, 1), "runs": []}
for s in sizes:
    ids = np.load(os.path.join(work, "ckpt", f"ids-{s}.npy")).reshape(-1).astype(np.int64)
    m.record_decisions(1e-2)
    t = time.time()
    logits = m.forward(ids)
    run = {"S": s, "forward_s": round(time.time() - t, 1), "decisions": {}}
    np.save(os.path.join(work, f"ref-{s}.tmp.npy"), logits)
    os.replace(os.path.join(work, f"ref-{s}.tmp.npy"), os.path.join(work, f"ref-{s}.npy"))
    # How near each top-k choice is to a tie (reference.topk_margin,
    # relative to its terms' size): choices a bf16 prefill may flip.
    for site, margins in m.decisions:
        kind = site.split(".")[0]
        d = run["decisions"].setdefault(kind, {"rows": 0, "below_1e-2": 0, "below_1e-3": 0, "min": None})
        fin = margins[np.isfinite(margins)]
        d["rows"] += int(fin.size)
        d["below_1e-2"] += int((fin < 1e-2).sum())
        d["below_1e-3"] += int((fin < 1e-3).sum())
        if fin.size:
            d["min"] = float(fin.min()) if d["min"] is None else min(d["min"], float(fin.min()))
    out["runs"].append(run)
with open(os.path.join(work, "reference.json"), "w") as f:
    json.dump(out, f, indent=1)
print(f"flash-prepare: reference: weights decoded in {out['decode_s']} s, "
      + ", ".join(f"S = {r['S']} in {r['forward_s']} s" for r in out["runs"]))
PY
  ref_pid=$!
  wait $export_pid || { echo "flash-prepare: export.py failed" >&2; kill $ref_pid 2>/dev/null; exit 1; }
  t2=$(date +%s)
  echo "flash-prepare: export in $((t2 - t1)) s"
  python3 "$v41/check_layout.py" "$bundle/models/v41-acc-flash" "$work/onnx" &
  wait $! || { kill $ref_pid 2>/dev/null; exit 1; }
  wait $ref_pid || { echo "flash-prepare: reference failed" >&2; exit 1; }
  echo "flash-prepare: reference done $(($(date +%s) - t1)) s after the checkpoint"
  printf '{"generate_s": %d, "export_s": %d, "reference_s": %d}\n' $((t1 - t0)) $((t2 - t1)) \
    $(($(date +%s) - t1)) >"$work/times.json"
  exit 0
fi

[[ $mode == run ]] || { echo "v41-accuracy.sh: mode must be compile, pack or run" >&2; exit 2; }
bundle=$(cd "${2:-$(dirname "$here")}" && pwd)
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# One device call may run 600 s: the run keeps within H20_ACC_BUDGET_S
# (default 540) so that the record is written whatever hangs.
start=$(date +%s)
budget=${H20_ACC_BUDGET_S:-540}
res=${H20_BENCH_RESULTS:-${OUT:+$OUT/v41-accuracy}}
res=${res:-/tmp/h20-bench/results}
work=${H20_ACC_WORK:-/tmp/v41-acc}
mkdir -p "$res"
log=$res/v41-accuracy.log
rows=$res/v41-accuracy.rows
: >"$log"
: >"$rows"
python3 -c "import numpy, onnx" 2>/dev/null ||
  { echo "v41-accuracy: python3 with numpy and onnx is needed" | tee -a "$log" >&2; exit 2; }
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
echo "v41-accuracy: ${gpu:-no GPU found}; bundle $(cat "$bundle/bench/v41-accuracy-build.json" 2>/dev/null)" | tee -a "$log"
# case_run MODEL MODE S ART WEIGHTS REF OUT TOL LOOSE TOKEN: one h20-run
# prefill of REF's directory's ids-S.npy compared with REF (npy-compare:
# relative L2, and the last position's next token); its status (the
# header's bounds: TOKEN "same" or "any" past TOL) and npy-compare's line
# appended to the rows file.
case_run() {
  local model=$1 m=$2 S=$3 art=$4 w=$5 ref=$6 o=$7 tol=$8 loose=$9 token=${10} st=FAIL cmp rel limit
  # At most 120 s, and never past the run's budget less 20 s for the record.
  limit=$((budget - ($(date +%s) - start) - 20))
  ((limit > 120)) && limit=120
  if ((limit < 10)); then
    cmp="not run: the run's ${budget} s budget (H20_ACC_BUDGET_S) is spent"
  elif timeout "$limit" "$bin/h20-run" "$art" --weights-dir "$w" --ids "$(dirname "$ref")/ids-$S.npy" \
       --dump-logits "$o" --report "${o%.npy}.json" >>"$log" 2>&1; then
    cmp=$("$bin/npy-compare" "$o" "$ref" --max-rel-l2 "$tol" 2>&1) && st=PASS
    rel=$(sed -n 's/^rel_l2 \([^ ]*\) .*/\1/p' <<<"$cmp")
    if [[ $st == FAIL && -n $rel ]] && awk -v r="$rel" -v b="$loose" 'BEGIN { exit !(r <= b) }'; then
      if [[ $token == any ]] || grep -qE 'argmax ([0-9]+) vs reference \1:' <<<"$cmp"; then
        st=INFO
      fi
    fi
  else
    cmp="h20-run failed (v41-accuracy.log)"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$model" "$m" "$S" "$st" "$tol" "$loose" "$o" "$ref" \
    "${cmp//$'\n'/ }" >>"$rows"
  printf '[%s] %-9s %-11s S=%-4s %-4s %s\n' "$(date +%T)" "$model" "$m" "$S" "$st" "$cmp" | tee -a "$log"
}
# bounds MODE COMPUTE: "TOL LOOSE TOKEN" (header).
bounds() {
  case $2:$1 in
    f32:*) echo "1e-4 1e-1 same" ;;
    bf16:fp8 | bf16:fp8-bf16) echo "1e-1 0.8 any" ;;
    *) echo "2e-2 0.8 any" ;;
  esac
}

# Flash: checkpoint, export and reference on the CPUs (background) while
# tiny-qat runs on the GPU.
flash_pid=
flash=$(cat "$bundle/models/v41-acc-flash/config" 2>/dev/null)
if [[ -n $flash && ${H20_ACC_FLASH:-1} != 0 ]]; then
  rm -rf "$work"
  mkdir -p "$work"
  # The budget less ~2 minutes for the Flash runs and the record.
  prepare_s=${H20_ACC_FLASH_PREPARE_S:-$((budget - 120))}
  ((prepare_s < 10)) && prepare_s=10
  timeout -k 10 "$prepare_s" bash "$0" flash-prepare "$bundle" "$work" >"$work/prepare.log" 2>&1 &
  flash_pid=$!
fi

m=$bundle/models/v41-qat-fp4
if [[ -d $m ]]; then
  mkdir -p "$work/tiny"
  for spec in "${tiny_modes[@]}"; do
    IFS=: read -r a sub ct flags <<<"$spec"
    art=$bundle/art/v41-qat-fp4.$a.h20
    [[ -f $art ]] || continue
    read -r tol loose token <<<"$(bounds "$a" "$ct")"
    for S in $tiny_sizes; do
      case_run tiny-qat "$a" "$S" "$art" "$m${sub:+/$sub}" "$m/ref-$S.npy" "$work/tiny/$a.S$S.npy" \
        "$tol" "$loose" "$token"
    done
  done
fi

if [[ -n $flash_pid ]]; then
  wait "$flash_pid"
  prc=$?
  cat "$work/prepare.log" | tee -a "$log"
  if [[ $prc != 0 ]]; then
    [[ $prc == 124 ]] && echo "v41-accuracy: flash-prepare ran past $prepare_s s" | tee -a "$log"
    for S in $flash_sizes; do
      printf '%s\t%s\t%s\t%s\t\t\t\t\t%s\n' "$flash" all "$S" FAIL \
        "checkpoint, export or reference failed (rc $prc; v41-accuracy.log)" >>"$rows"
    done
  else
    for spec in "${flash_modes[@]}"; do
      IFS=: read -r a sub ct flags <<<"$spec"
      art=$bundle/art/v41-acc-flash.$a.h20
      [[ -f $art ]] || continue
      read -r tol loose token <<<"$(bounds "$a" "$ct")"
      # f32 at Flash widths (K up to 32768): 1e-3.
      [[ $ct == f32 ]] && tol=1e-3
      for S in $flash_sizes; do
        case_run "$flash" "$a" "$S" "$art" "$work/onnx" "$work/ref-$S.npy" "$work/$a.S$S.npy" \
          "$tol" "$loose" "$token"
      done
    done
  fi
fi

# The record: JSON and the markdown table (last), with the share of
# positions whose next token agrees and each model's baseline beside it.
python3 - "$res" "$rows" "$work" "$gpu" "$bundle/bench/v41-accuracy-build.json" "$flash" <<'PY'
import json
import os
import re
import sys

import numpy as np

res, rows_path, work, gpu, info_path, flash = sys.argv[1:7]
try:
    info = json.load(open(info_path))
except (OSError, ValueError):
    info = {}
MODES = {
    "f32": "MXFP4 experts, linears widened on export; f32",
    "bf16": "MXFP4 experts, linears widened on export; bf16",
    "fp8-bf16": "FP8 linears (FP8 GEMMs), MXFP4 experts; bf16",
    "fp8-deqgemm": "FP8 linears dequantised per GEMM, MXFP4 experts; bf16",
    "fp8-deqf32": "FP8 linears dequantised per GEMM, MXFP4 experts; f32",
    "deq-bf16": "dequantised on export; bf16 (baseline)",
    "fp8": "FP8 linears (FP8 GEMMs), MXFP4 experts; bf16",
    "deqgemm": "FP8 linears dequantised per GEMM, MXFP4 experts; bf16 (baseline)",
    "deqf32": "FP8 linears dequantised per GEMM, MXFP4 experts; f32",
    "all": "(not run)",
}
BASELINE = ("deq-bf16", "deqgemm")  # tiny-qat's, the Flash model's
rows = []
for line in open(rows_path):
    model, mode, s, st, tol, loose, out, ref, cmp = line.rstrip("\n").split("\t")
    row = {"model": model, "mode": mode, "weights": MODES.get(mode, mode), "S": int(s), "status": st,
           "bound": tol, "loose_bound": loose, "compare": cmp}
    mt = re.match(r"rel_l2 (\S+) .*argmax (\d+) vs reference (\d+)", cmp)
    if mt:
        row["rel_l2"] = float(mt.group(1))
        row["same_next_token"] = mt.group(2) == mt.group(3)
        # The share of positions whose next token agrees (every row of the
        # logits; the gate above reads the last one).
        a, b = np.load(out), np.load(ref)
        if a.shape == b.shape:
            row["same_next_token_share"] = float((a.argmax(-1) == b.argmax(-1)).mean())
    rows.append(row)
out = {"gpu": gpu, "build": info, "rows": rows}
for name in ("times.json", "reference.json"):
    try:
        out["flash_" + name.split(".")[0]] = json.load(open(os.path.join(work, name)))
    except (OSError, ValueError):
        pass
base = {(r["model"], r["S"]): r for r in rows if r["mode"] in BASELINE}


def fmt(r):
    """(rel L2, next token) cells: the last position's, and the share of
    positions that agree."""
    if "rel_l2" not in r:
        return "-", "-"
    tok = "yes" if r["same_next_token"] else "no"
    if "same_next_token_share" in r:
        tok += f" ({100 * r['same_next_token_share']:.0f}% of positions)"
    return f"{r['rel_l2']:.2e}", tok


# Every mode with its status, then the short table (last): the FP8 / FP4
# weights kept quantised, FP8 GEMMs and bf16 GEMMs on dequantised FP8,
# beside the dequantised bf16 baseline.
lines = ["| model | weights mode | S | rel L2 vs reference | same next token | status (bound) |",
         "| --- | --- | --- | --- | --- | --- |"]
for r in rows:
    rel, tok = fmt(r)
    bound = f" ({r['bound']}, loose {r['loose_bound']})" if r["bound"] else f": {r['compare']}"
    lines.append(f"| {r['model']} | {r['weights']} | {r['S']} | {rel} | {tok} | {r['status']}{bound} |")
short = ["| model | weights mode | S | rel L2 vs reference | same next token | "
         "bf16 baseline, dequantised: rel L2 | baseline: same next token |",
         "| --- | --- | --- | --- | --- | --- | --- |"]
for r in rows:
    if r["mode"] not in ("fp8-bf16", "fp8-deqgemm", "fp8", "all"):
        continue
    rel, tok = fmt(r)
    b = base.get((r["model"], r["S"]))
    brel, btok = fmt(b) if b else ("-", "-")
    short.append(f"| {r['model']} | {r['weights']} | {r['S']} | {rel} | {tok} | {brel} | {btok} |")
notes = []
ref = out.get("flash_reference")
if ref:
    for run in ref["runs"]:
        parts = [f"{k}: {d['below_1e-2']} of {d['rows']} rows within 1e-2 of a tie ({d['below_1e-3']} within 1e-3)"
                 for k, d in sorted(run["decisions"].items())]
        notes.append(f"{flash} S = {run['S']}, reference.py's top-k decisions: " + "; ".join(parts) + ".")
t = out.get("flash_times")
if t:
    notes.append(f"{flash}: checkpoint {t['generate_s']} s, export {t['export_s']} s, "
                 f"reference {t['reference_s']} s (beside the export).")
json.dump(out, open(os.path.join(res, "v41-accuracy.json"), "w"), indent=1)
md = "\n".join([f"DeepSeek-V4.1, FP8 / FP4 weights kept quantised, against reference.py (float32, "
                f"dequantised) on the same checkpoint: {gpu or 'no GPU (CPU artifacts?)'}, build "
                f"{info.get('commit', '?')}" + (" (dirty)" if info.get("dirty") else ""), ""]
               + notes + ([""] if notes else []) + lines + [""] + short)
open(os.path.join(res, "v41-accuracy.md"), "w").write(md + "\n")
print()
print(md)
PY
failed=0
grep -q $'^[^\t]*\t[^\t]*\t[^\t]*\tFAIL\t' "$rows" && failed=1
rm -f "$rows"
[[ ${H20_ACC_KEEP:-0} == 1 ]] || rm -rf "$work"
exit $failed
