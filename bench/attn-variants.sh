#!/usr/bin/env bash
# The wgmma attention kernel's variants side by side on one GPU, in one run:
# correctness (attention-check's cases on every variant, TMA loads where the
# views allow), then timing of causal bf16 attention (B=1, H=32, D=128) per
# variant with TMA loads and with cp.async loads (H20_ATTENTION_TMA=0), then
# PyTorch SDPA's cuDNN and FlashAttention-2 on the same shapes
# (bench/attn_torch.py), and the SASS of the variants when cubins are given.
#
# Usage (on the GPU machine): bench/attn-variants.sh BIN_DIR OUT_DIR [CUBIN_DIR]
#   BIN_DIR   holds attention-check (and lib/ beside it for its libraries)
#   OUT_DIR   logs and JSON: check.log, time-tma.json, time-cpasync.json,
#             attn-torch.json, sass.txt
# Environment: H20_VARIANTS (STAGES:SCHEDULE list, default
# "2:1,3:1,2:2,3:2"), H20_ATTN_S (default "8192 32768 131072").
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?usage: attn-variants.sh BIN_DIR OUT_DIR [CUBIN_DIR]}
out=${2:?usage: attn-variants.sh BIN_DIR OUT_DIR [CUBIN_DIR]}
cubins=${3:-}
variants=${H20_VARIANTS:-2:1,3:1,2:2,3:2}
sizes=${H20_ATTN_S:-8192 32768 131072}
csv=$(tr ' ' ',' <<<"$sizes")
mkdir -p "$out"
export LD_LIBRARY_PATH=$bin/../lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
"$bin/attention-check" --no-timing --kernels wgmma --wgmma-variants "$variants" \
  >"$out/check.log" 2>&1 || status=1
tail -1 "$out/check.log"
grep -a '^FAIL' "$out/check.log" | head -20
"$bin/attention-check" --no-check --kernels wgmma --wgmma-variants "$variants" --time "$csv" \
  --json "$out/time-tma.json" >"$out/time-tma.log" 2>&1 || status=1
H20_ATTENTION_TMA=0 "$bin/attention-check" --no-check --kernels wgmma --wgmma-variants "$variants" \
  --time "$csv" --json "$out/time-cpasync.json" >"$out/time-cpasync.log" 2>&1 || status=1
# shellcheck disable=SC2086
python3 "$here/attn_torch.py" --S $sizes --out "$out/attn-torch.json" >"$out/torch.log" 2>&1 || status=1
if [[ -n $cubins ]]; then
  for c in "$cubins"/*.cubin; do
    sass=$(cuobjdump -sass "$c")
    printf '%s: HGMMA %s, UTMALDG %s, LDL/STL %s\n' "$(basename "$c")" \
      "$(grep -c HGMMA <<<"$sass")" "$(grep -c UTMALDG <<<"$sass")" \
      "$(grep -cE '\b(LDL|STL)\b' <<<"$sass")"
  done | tee "$out/sass.txt"
fi
python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
rows = {}
for f, tag in (("time-tma.json", ""), ("time-cpasync.json", "")):
    p = os.path.join(out, f)
    if os.path.exists(p):
        for r in json.load(open(p)):
            rows.setdefault(r["kernel"], {})[r["S"]] = r["tflops"]
p = os.path.join(out, "attn-torch.json")
if os.path.exists(p):
    for r in json.load(open(p)):
        if "tflops" in r:
            rows.setdefault("torch-" + r["impl"], {})[r["S"]] = r["tflops"]
sizes = sorted({s for v in rows.values() for s in v})
print("%-60s" % "TFLOP/s" + "".join("%10d" % s for s in sizes))
for k, v in rows.items():
    print("%-60s" % k + "".join("%10.1f" % v.get(s, float("nan")) for s in sizes))
PY
exit $status
