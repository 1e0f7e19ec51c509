#!/usr/bin/env bash
# On the GPU machine (torch + transformers):
#   1. the parts V4.1 shares with V4 against transformers' DeepseekV4 modules
#      (check_v4_modules.py; CPU, float32);
#   2. reference.py against DeepseekV41ForCausalLM (gpu-check-transformers.sh:
#      transformers' own deepseek_v41, or the copy vendor_transformers.sh put in
#      the git-ignored .hf_deepseek_v41/, which the run must carry).
# Usage: models/deepseek_v41/gpu-check.sh [WORKDIR]   (default /tmp/h20-v41)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-/tmp/h20-v41}
py=${PYTHON:-python3}
mkdir -p "$work"
"$py" -c "import transformers, torch; print('transformers', transformers.__version__, 'torch', torch.__version__)"
"$py" "$here/check_v4_modules.py"
v4=$?
"$here/gpu-check-transformers.sh" "$work/transformers"
v41=$?
exit $((v4 != 0 || v41 != 0))
