#!/usr/bin/env python3
"""Copy a DeepSeek-V4.1 checkpoint (one model.safetensors) with one routed
expert's FP4 weight stored widened to float32 (its `.scale` dropped):
a layer whose experts are only partly FP4.

Usage: widen_one_expert.py SRC_DIR DST_DIR TENSOR_NAME
"""
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "models", "deepseek_v41"))
import safetensors_io as st  # noqa: E402


def main():
    src, dst, name = sys.argv[1:4]
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if f not in ("model.safetensors",) and os.path.isfile(os.path.join(src, f)):
            shutil.copy(os.path.join(src, f), dst)
    c = st.Checkpoint(src)
    scale = name[: -len(".weight")] + ".scale"
    out = {}
    for n in c.where:
        dtype, _ = c.info(n)
        if n == scale:
            continue
        if n == name:
            out[n] = c.read(n).astype(np.float32)  # dequantised exactly
        elif dtype in ("F8_E4M3", "F8_E8M0"):
            out[n] = (np.array(c.raw(n), dtype=np.uint8), dtype)
        elif dtype == "BF16":
            out[n] = st.bf16_to_f32(np.array(c.raw(n)))
        else:
            out[n] = np.array(c.raw(n))
    st.write(os.path.join(dst, "model.safetensors"), out)


if __name__ == "__main__":
    main()
