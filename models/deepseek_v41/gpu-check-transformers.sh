#!/usr/bin/env bash
# On the GPU machine (python3 with torch, transformers, numpy; no network):
# reference.py against transformers' DeepseekV41ForCausalLM in float32
# (check_transformers.py), on random checkpoints generate.py writes here:
#   tiny            every layer kind and Engram; its top-k choices are real, so
#                   it is compared on prompts of S = 8 and 129 whose every
#                   decision is >= 1e-5 from flipping (--prompts; at S = 1000
#                   no random prompt is, see check_transformers.py)
#   tiny-all-picks  every top-k keeps all it chooses from: nothing can flip,
#                   so S = 8, 129 and 1000
#   tiny-qat        FP8/FP4 fake quantisation on: S = 8 and 129 reported, not
#                   gated (a value on a rounding boundary of the e2m1 grid is
#                   not a decision a prompt choice can steer clear of)
# A config missing under configs/ is skipped with a note. Prints one line per
# case and a final PASS or FAIL with the reason; exits 0 on PASS, 1 on FAIL.
#
# transformers 5.17 has no deepseek_v41: the model files come from
# models/deepseek_v41/.hf_deepseek_v41 (vendor_transformers.sh; git-ignored, so
# the run must carry it).
#
# Usage: models/deepseek_v41/gpu-check-transformers.sh [WORKDIR]   (default /tmp/h20-v41-hf)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-/tmp/h20-v41-hf}
py=${PYTHON:-python3}
device=${DEVICE:-cuda}
t0=$SECONDS
status=0
failures=()
fail() { failures+=("$1"); status=1; echo "gpu-check-transformers: $1"; }
finish() {
  if ((status)); then
    echo "gpu-check-transformers: FAIL after $((SECONDS - t0)) s: ${failures[*]}"
  else
    echo "gpu-check-transformers: PASS after $((SECONDS - t0)) s"
  fi
  exit "$status"
}

mkdir -p "$work" || { fail "cannot create $work"; finish; }
"$py" -c "import numpy, torch, transformers; print('python', __import__('sys').version.split()[0], \
'numpy', numpy.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)" ||
  { fail "$py lacks numpy, torch or transformers"; finish; }
if [[ $device == cuda* ]]; then
  "$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" ||
    { fail "torch sees no CUDA device (DEVICE=cpu runs on the CPU)"; finish; }
fi
if [[ -f $here/.hf_deepseek_v41/UPSTREAM ]]; then
  echo "vendored transformers files: $(head -1 "$here/.hf_deepseek_v41/UPSTREAM")"
elif ! "$py" -c "import transformers.models.deepseek_v41" 2>/dev/null; then
  fail "no models/deepseek_v41/.hf_deepseek_v41 (run vendor_transformers.sh and carry the folder) and transformers has no deepseek_v41"
  finish
fi

# name, prompt lengths, extra check_transformers.py flags
cases=(
  "tiny|8 129|"
  "tiny-all-picks|8 129 1000|"
  "tiny-qat|8 129|--report-only"
)
for c in "${cases[@]}"; do
  IFS='|' read -r cfg lengths flags <<<"$c"
  if [[ ! -f $here/configs/$cfg.json ]]; then
    echo "gpu-check-transformers: configs/$cfg.json not present, $cfg skipped"
    continue
  fi
  if ! out=$("$py" "$here/generate.py" "$cfg" "$work/$cfg" 2>&1); then
    echo "$out"
    fail "generate.py $cfg failed"
    continue
  fi
  # A guard against a hang, not a budget: one config's check takes seconds.
  # shellcheck disable=SC2086
  timeout 80 "$py" "$here/check_transformers.py" "$work/$cfg" --prompts $lengths --device "$device" $flags
  rc=$?
  case $rc in
    0) ;;
    124) fail "$cfg: check_transformers.py timed out (80 s)" ;;
    2) fail "$cfg: no DeepseekV41ForCausalLM could be imported (see above)" ;;
    *) fail "$cfg: check_transformers.py exited $rc (see above)" ;;
  esac
done
finish
