#!/usr/bin/env bash
# On the GPU machine (torch + transformers):
#   1. the parts V4.1 shares with V4 against transformers' DeepseekV4 modules
#      (check_v4_modules.py; CPU, float32);
#   2. when transformers has deepseek_v41: the tiny and tiny-qat random
#      checkpoints with S = 8, 129, 1000 prompts, reference.py against
#      DeepseekV41ForCausalLM (check_transformers.py); exit 2 of that script
#      (no deepseek_v41) is reported and not a failure.
# Usage: models/deepseek_v41/gpu-check.sh [WORKDIR]   (default /tmp/h20-v41)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-/tmp/h20-v41}
py=${PYTHON:-python3}
mkdir -p "$work"
"$py" -c "import transformers, torch; print('transformers', transformers.__version__, 'torch', torch.__version__)"
"$py" "$here/check_v4_modules.py"
v4=$?
if "$py" -c "import transformers.models.deepseek_v41" 2>/dev/null; then
  for cfg in tiny tiny-qat; do
    "$py" "$here/generate.py" "$cfg" "$work/$cfg" --ids 8 129 1000 || exit 1
  done
  "$py" "$here/check_transformers.py" "$work/tiny" "$work/tiny-qat" --device "${DEVICE:-cuda}"
  v41=$?
else
  echo "gpu-check: this transformers has no deepseek_v41; DeepseekV41ForCausalLM not compared"
  v41=0
fi
exit $((v4 != 0 || v41 != 0))
