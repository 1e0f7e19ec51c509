#!/usr/bin/env python3
"""Copy a DeepSeek-V4.1 checkpoint (one model.safetensors) with one routed
expert's FP4 weight TENSOR_NAME (P.weight) edited by MODE:
  widen       stored widened to float32, P.scale dropped (a layer whose
              experts are only partly FP4);
  drop-scale  the packed bytes kept, P.scale dropped (a broken checkpoint);
  nan-scale   every ue8m0 scale byte of P set to 255 (E8M0's NaN).

Usage: edit_expert.py SRC_DIR DST_DIR TENSOR_NAME MODE
"""
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "models", "deepseek_v41"))
import safetensors_io as st  # noqa: E402


def main():
    src, dst, name, mode = sys.argv[1:5]
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if f not in ("model.safetensors",) and os.path.isfile(os.path.join(src, f)):
            shutil.copy(os.path.join(src, f), dst)
    c = st.Checkpoint(src)
    scale = name[: -len(".weight")] + ".scale"
    out = {}
    for n in c.where:
        dtype, _ = c.info(n)
        if n == scale and mode in ("widen", "drop-scale"):
            continue
        if n == scale and mode == "nan-scale":
            out[n] = (np.full(c.info(n)[1], 255, dtype=np.uint8), "F8_E8M0")
        elif n == name and mode == "widen":
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
