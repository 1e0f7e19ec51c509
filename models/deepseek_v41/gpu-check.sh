#!/usr/bin/env bash
# On the GPU machine (torch + transformers): generates the tiny and tiny-qat
# random checkpoints with S = 8, 129, 1000 prompts and checks reference.py
# against transformers' DeepseekV41ForCausalLM on them (check_transformers.py).
# Usage: models/deepseek_v41/gpu-check.sh [WORKDIR]   (default /tmp/h20-v41)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-/tmp/h20-v41}
py=${PYTHON:-python3}
mkdir -p "$work"
for cfg in tiny tiny-qat; do
  "$py" "$here/generate.py" "$cfg" "$work/$cfg" --ids 8 129 1000
done
"$py" -c "import transformers, torch; print('transformers', transformers.__version__, 'torch', torch.__version__)"
"$py" "$here/check_transformers.py" "$work/tiny" "$work/tiny-qat" --device "${DEVICE:-cuda}"
