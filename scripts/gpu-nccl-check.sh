#!/usr/bin/env bash
# Issue 8 on a machine with 2 or more GPUs: real context-parallel ranks
# (h20-run --gpus N: one process per GPU, K/V passed over NCCL) against the
# 1-GPU run, the scaling of seed-dense layers, and fault handling.
#   scripts/gpu-nccl-check.sh BUNDLE       (a bundle made by scripts/gpu-bundle.sh)
# Cases (N = 2, 4, 8 up to the GPUs visible):
#   - every fixture artifact art/llama_*.last.h20 at S = 1024 (CP chunks of
#     S / 2N tokens, compiled chunk 64);
#   - seed-dense shapes, 2 layers, S = 32768 (art/seed-dense-2l.bf16.last.h20)
#     and S = 262144 (art/seed-dense-2l.S262144.h20): logits, and TTFT of
#     N GPUs vs 1 GPU measured here (median of 3 after a warm-up), the
#     scaling efficiency T1 / (N * TN);
#   - faults: (a) a rank killed (SIGKILL) in the middle of a prefill ends
#     the job started by h20-run with a non-zero exit naming the rank, in
#     under 60 s; (b) torchrun-style ranks (WORLD_SIZE/RANK set by hand,
#     H20_NCCL_TIMEOUT_S=10): after rank 1 is killed, rank 0 aborts NCCL
#     and exits non-zero on its own; (c) a rank whose peer never starts
#     gives up after the timeout instead of waiting for ever.
# PASS: logits bitwise equal to N = 1, or else relative L2 <= 2e-2 (bf16;
# 1e-3 f32) with the same argmax; the launcher printed "collectives match";
# the report says context_parallel.mode = "nccl". Faults: as above.
# Results: BUNDLE/results/nccl-check.{txt,json,log} (and $OUT/ when set).
# Exit 1 if any case failed; 0 with every case SKIPped on fewer than 2 GPUs.
# H20_NCCL_CHECK_ONLY=faults runs the fault cases alone.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=${1:-$here}
[[ -x $bundle/bin/h20-run ]] || { echo "gpu-nccl-check: no bin/h20-run in '$bundle'" >&2; exit 2; }
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0
results=$bundle/results/nccl-check
mkdir -p "$results"
# The log goes straight to $OUT when set, so a run cut short still tells.
log=${OUT:-$bundle/results}/nccl-check.log
mkdir -p "$(dirname "$log")"
: >"$log"
# Every h20-run gets a hard limit: a hang is a failure, never a stuck check.
limit=${H20_CHECK_LIMIT_S:-150}
t_start=$SECONDS
rows=()
json=()
failed=0
record() { # name status detail
  rows+=("$(printf '%-44s %-5s %s' "$1" "$2" "$3")")
  printf '%-44s %-5s %s\n' "$1" "$2" "$3" | tee -a "$log"
  local d=${3//\\/\\\\}
  d=${d//\"/\\\"}
  json+=("{\"test\": \"$1\", \"status\": \"$2\", \"detail\": \"$d\"}")
  [[ $2 == FAIL ]] && failed=1
}
field() { # REPORT.json KEY...
  python3 - "$@" <<'PY' 2>/dev/null || echo "?"
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2:]:
    v = v[k]
print(round(v, 2) if isinstance(v, float) else v)
PY
}

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
ns=""
for n in 2 4 8; do ((n <= gpus)) && ns+="$n "; done
echo "GPUs visible: $gpus; N: ${ns:-none}" >>"$log"

# compare NAME ART IDS WDIR TOL [EXTRA...]: the 1-GPU run, then --gpus N.
compare() {
  local name=$1 art=$2 ids=$3 wdir=$4 tol=$5
  shift 5
  local base=$results/$name
  if [[ -z $ns ]]; then record "$name" SKIP "fewer than 2 GPUs ($gpus)"; return; fi
  if ! timeout -s KILL $limit "$bin/h20-run" "$art" --ids "$ids" --weights-dir "$wdir" "$@" \
      --dump-logits "$base.n1.npy" --report "$base.n1.json" >>"$log" 2>&1; then
    record "$name" FAIL "the 1-GPU run failed (see nccl-check.log)"; return
  fi
  local t1; t1=$(field "$base.n1.json" ttft_ms)
  for n in $ns; do
    local o=$base.n$n st cmp bitwise mode ttft eff
    echo "== $name N=$n" >>"$log"
    timeout -s KILL $limit "$bin/h20-run" "$art" --ids "$ids" --weights-dir "$wdir" "$@" --gpus "$n" \
      --dump-logits "$o.npy" --report "$o.json" >"$o.out" 2>&1
    local rc=$?
    cat "$o.out" >>"$log"
    if [[ $rc != 0 ]]; then
      record "$name N=$n" FAIL "exit $rc: $(grep -m1 -o 'error: .*' "$o.out" | cut -c1-120)"
      continue
    fi
    if cmp -s "$o.npy" "$base.n1.npy"; then bitwise=bitwise; else bitwise=differs; fi
    if cmp=$("$bin/npy-compare" "$o.npy" "$base.n1.npy" --max-rel-l2 "$tol" 2>&1); then st=PASS; else st=FAIL; fi
    echo "$cmp" >>"$log"
    grep -q "collectives match" "$o.out" || st=FAIL
    mode=$(field "$o.json" context_parallel mode)
    [[ $mode == nccl ]] || st=FAIL
    ttft=$(field "$o.json" ttft_ms)
    eff=$(awk -v a="$t1" -v b="$ttft" -v n="$n" 'BEGIN { if (b > 0) printf "%.0f%%", 100 * a / (n * b); else print "?" }')
    record "$name N=$n" $st "$bitwise; ${cmp%%:*}; mode $mode; TTFT $ttft ms vs 1 GPU $t1 ms (efficiency $eff)"
  done
}

# H20_NCCL_CHECK_ONLY=faults: the fault cases alone.
only=${H20_NCCL_CHECK_ONLY:-all}
for art in "$bundle"/art/llama_*.last.h20; do
  [[ $only == all ]] || break
  [[ -f $art ]] || continue
  b=$(basename "$art" .h20)
  m=${b%%.*}
  tol=2e-2
  [[ $b == *.f32* ]] && tol=1e-3
  compare "$b" "$art" "$bundle/models/$m.ids1024.npy" "$bundle/models" $tol --warmup 0
done

sd=$bundle/seed-dense-2l
have_sd=no
if [[ -n $ns && -d $sd ]] && python3 -c "import numpy" 2>/dev/null &&
   python3 "$bundle/models/llama/generate.py" seed-dense "$sd" --layers 2 --weights >>"$log" 2>&1 &&
   python3 -c "
import numpy as np
r = np.random.default_rng(0)
for S in (32768, 262144):
    np.save('$sd/ids%d.npy' % S, r.integers(0, 129280, (1, S), dtype=np.int64))"; then
  have_sd=yes
fi
if [[ $have_sd == yes && $only != all ]]; then
  :
elif [[ $have_sd == yes ]]; then
  compare seed-dense-2l.S32768 "$bundle/art/seed-dense-2l.bf16.last.h20" "$sd/ids32768.npy" "$sd" 2e-2
  [[ -f $bundle/art/seed-dense-2l.S262144.h20 ]] &&
    compare seed-dense-2l.S262144 "$bundle/art/seed-dense-2l.S262144.h20" "$sd/ids262144.npy" "$sd" 2e-2 \
      --warmup 1 --repeat 3
else
  record "seed-dense-2l" SKIP "fewer than 2 GPUs, or the weights could not be made here"
fi

# Faults (2 ranks, seed-dense-2l at S = 262144: a run takes long enough).
fart=$bundle/art/seed-dense-2l.S262144.h20
if [[ $have_sd == yes && -f $fart ]]; then
  # (a) h20-run's launcher: kill rank 1 after 4 s of a 40-run job.
  timeout -s KILL 90 "$bin/h20-run" "$fart" --ids "$sd/ids262144.npy" --weights-dir "$sd" --gpus 2 --warmup 0 \
    --repeat 40 >"$results/kill-launcher.out" 2>&1 &
  launcher=$!
  sleep 4
  victim=""
  # (timeout's child is the launcher; the ranks are the launcher's children)
  for c in $(pgrep -P "$(pgrep -P "$launcher" | head -1)") $(pgrep -P "$launcher"); do
    tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx 'RANK=1' && victim=$c
  done
  echo "launcher $launcher, rank 1 pid ${victim:-not found}" >>"$log"
  t0=$(date +%s.%N)
  [[ -n $victim ]] && kill -9 "$victim"
  wait "$launcher"; rc=$?
  dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  cat "$results/kill-launcher.out" >>"$log"
  msg=$(grep -m1 -o 'rank 1 (pid [0-9]*) was killed.*' "$results/kill-launcher.out")
  if [[ -n $victim && $rc != 0 && -n $msg ]] && awk -v d="$dt" 'BEGIN { exit !(d < 60) }'; then st=PASS; else st=FAIL; fi
  record "fault: rank 1 killed (h20-run launcher)" $st "exit $rc after ${dt} s: ${msg:-no message}"

  # (b) torchrun-style: each rank started by hand; rank 0 must notice alone.
  idf=$results/nccl-id.$$; rm -f "$idf"
  # (rank 0 under a hard limit; rank 1 plain, so $pid1 is h20-run itself)
  timeout -s KILL 90 env WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 H20_NCCL_ID_FILE="$idf" H20_NCCL_TIMEOUT_S=10 \
    "$bin/h20-run" "$fart" --ids "$sd/ids262144.npy" --weights-dir "$sd" --warmup 0 --repeat 40 \
    >"$results/kill-rank0.out" 2>&1 &
  pid0=$!
  env WORLD_SIZE=2 RANK=1 LOCAL_RANK=1 H20_NCCL_ID_FILE="$idf" H20_NCCL_TIMEOUT_S=10 \
    "$bin/h20-run" "$fart" --ids "$sd/ids262144.npy" --weights-dir "$sd" --warmup 0 --repeat 40 \
    >"$results/kill-rank1.out" 2>&1 &
  pid1=$!
  sleep 6
  t0=$(date +%s.%N)
  kill -9 "$pid1"
  wait "$pid0"; rc=$?
  dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  wait "$pid1" 2>/dev/null
  cat "$results/kill-rank0.out" >>"$log"
  msg=$(grep -m1 -o 'error: .*' "$results/kill-rank0.out" | cut -c1-150)
  if [[ $rc != 0 && -n $msg ]] && awk -v d="$dt" 'BEGIN { exit !(d < 60) }'; then st=PASS; else st=FAIL; fi
  record "fault: rank 1 killed (torchrun-style)" $st "rank 0 exit $rc after ${dt} s: ${msg:-no message}"
  rm -f "$idf"

  # (c) the peer never starts.
  t0=$SECONDS
  timeout -s KILL 90 env WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 H20_NCCL_ID_FILE="$idf" H20_NCCL_TIMEOUT_S=5 \
    "$bin/h20-run" "$fart" --ids "$sd/ids262144.npy" --weights-dir "$sd" --warmup 0 \
    >"$results/alone.out" 2>&1
  rc=$?
  dt=$((SECONDS - t0))
  cat "$results/alone.out" >>"$log"
  msg=$(grep -m1 -o 'error: .*' "$results/alone.out" | cut -c1-150)
  if [[ $rc != 0 && $msg == *"did not complete within"* && $dt -lt 60 ]]; then st=PASS; else st=FAIL; fi
  record "fault: peer never starts" $st "rank 0 exit $rc after ${dt} s: ${msg:-no message}"
  rm -f "$idf"
else
  record "faults" SKIP "fewer than 2 GPUs, or no seed-dense-2l S262144 artifact/weights"
fi
rm -f "$sd/weights.bin"

elapsed=$((SECONDS - t_start))
{
  echo "["
  for ((i = 0; i < ${#json[@]}; ++i)); do
    echo "  ${json[$i]}$([[ $i -lt $((${#json[@]} - 1)) ]] && echo ,)"
  done
  echo "]"
} >"$bundle/results/nccl-check.json"
{
  printf '%-44s %-5s %s\n' TEST STATUS DETAIL
  printf '%s\n' "${rows[@]}"
  echo "real NCCL ranks ($gpus GPUs): $(grep -c ' PASS ' <<<"$(printf '%s\n' "${rows[@]}")") passed of ${#rows[@]}; ${elapsed} s"
} >"$bundle/results/nccl-check.txt"
if [[ -n ${OUT:-} ]]; then
  mkdir -p "$OUT/nccl-check"
  cp "$bundle"/results/nccl-check.{txt,json} "$OUT/" 2>/dev/null
  cp "$results"/*.json "$OUT/nccl-check/" 2>/dev/null
fi
echo
cat "$bundle/results/nccl-check.txt"
exit $failed
