#!/usr/bin/env python3
"""Regenerates the seeds of the `pipeline` fuzz target in
test/Fuzz/corpus/pipeline/ (the `regress-*` inputs there are kept: they are
what runs found, not generated).

Usage: make-pipeline-seeds.py   (needs python3-onnx, i.e. Debian's
/usr/bin/python3, and ../shared beside the clone for the conformance models)

Seeds, all binary ModelProtos and small (the mutator works on parsed models,
so every seed should be one the importer accepts):
  onnxtext-*  every .onnxtext model under test/ (the importer's, the raising
              passes' and the CPU target's tests), parsed by onnx.parser;
  op-*        the op-case models of test/Target/CPU/Inputs/make_op_cases.py;
  conf-*      a selection of ONNX's Attention / RotaryEmbedding /
              RMSNormalization node tests (../shared/conformance/onnx-node);
  demo-op23, fixture-*  copied from corpus/onnx-import (the demo and fixture
              decoders, weights moved to external data "data.bin", which the
              fuzz target provides as a 16 MiB sparse file).
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import onnx
import onnx.parser

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
out = os.path.join(here, "corpus", "pipeline")
os.makedirs(out, exist_ok=True)
for f in os.listdir(out):
    if not f.startswith("regress-"):
        os.remove(os.path.join(out, f))


def write(name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


for path in sorted(glob.glob(os.path.join(root, "test", "**", "*.onnxtext"), recursive=True)):
    name = "onnxtext-" + os.path.splitext(os.path.basename(path))[0]
    try:
        model = onnx.parser.parse_model(open(path).read())
    except Exception as e:  # noqa: BLE001 - a model this onnx cannot parse is skipped
        print("skipped %s: %s" % (path, str(e).splitlines()[0]), file=sys.stderr)
        continue
    write(name, model.SerializeToString())

with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([sys.executable, os.path.join(root, "test", "Target", "CPU", "Inputs",
                                                 "make_op_cases.py"), tmp], check=True)
    for case in sorted(os.listdir(tmp)):
        shutil.copyfile(os.path.join(tmp, case, "model.onnx"), os.path.join(out, "op-" + case))

conformance = os.path.join(root, "..", "shared", "conformance", "onnx-node")
for case in ["attention_3d", "attention_3d_gqa_causal", "attention_3d_diff_heads_sizes_softcap",
             "attention_3d_with_past_and_present_qk_matmul_bias", "attention_4d_attn_mask_bool",
             "attention_4d_gqa_with_past_and_present", "attention_4d_fp16",
             "attention_4d_causal_nonpad_continued_prefill", "attention_4d_attn_mask_4d_causal",
             "attention_local_window_gqa_rank4_mask", "attention_bidirectional_window",
             "attention_4d_with_qk_matmul_softmax", "rms_normalization_3d_axis1_epsilon",
             "rms_normalization_default_axis", "rotary_embedding", "rotary_embedding_interleaved",
             "rotary_embedding_no_position_ids_rotary_dim", "rotary_embedding_3d_input"]:
    path = os.path.join(conformance, "test_" + case, "model.onnx")
    if os.path.exists(path):
        shutil.copyfile(path, os.path.join(out, "conf-" + case.replace("_", "-")))
    else:
        print("skipped %s (no ../shared)" % path, file=sys.stderr)

for name in ["demo-op23", "fixture-op18", "fixture-mha-op23"]:
    shutil.copyfile(os.path.join(here, "corpus", "onnx-import", name), os.path.join(out, name))
