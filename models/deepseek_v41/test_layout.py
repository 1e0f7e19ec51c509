#!/usr/bin/env python3
"""Tests of what bench/v41-accuracy.sh's Flash-shaped run relies on:

* generate.py --jobs N writes the same tensors (bytes, dtypes, shapes) as
  one process, as shards with an index, and their export is the same file;
* check_layout.py accepts a full export of a checkpoint against the
  --graph-only export of its config (same flags), and rejects, naming
  the difference, an export with other flags or other layers or a data
  file of another size; a constant of another value only warns.

Prints "test_layout: PASS" (exit 0), or the failures (exit 1).
Usage: test_layout.py
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from safetensors_io import Checkpoint  # noqa: E402

# tiny-chunked: every layer kind but Engram (a graph-only export has no
# token map), like the Flash configs.
CONFIG = "tiny-chunked"
FLAGS = ["--fp8-linears", "--fp4-experts"]


def run(*args):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True)


def main():
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        one, four = os.path.join(tmp, "one"), os.path.join(tmp, "four")
        for d, jobs in ((one, "1"), (four, "4")):
            r = run(os.path.join(HERE, "generate.py"), CONFIG, d, "--quantize", "fp8-fp4-experts",
                    "--ids", "8", "--jobs", jobs)
            check(r.returncode == 0, f"generate.py --jobs {jobs}: {r.stderr.strip()}")
        check(os.path.exists(os.path.join(four, "model.safetensors.index.json"))
              and not os.path.exists(os.path.join(four, "model.safetensors")), "--jobs 4 wrote no sharded checkpoint")
        a, b = Checkpoint(one), Checkpoint(four)
        check(set(a.where) == set(b.where), "--jobs 4 wrote other tensor names")
        for name in set(a.where) & set(b.where):
            same = a.info(name) == b.info(name) and np.array_equal(np.asarray(a.raw(name)).view(np.uint8),
                                                                    np.asarray(b.raw(name)).view(np.uint8))
            check(same, f"{name}: --jobs 4 wrote other bytes")

        exports = {}
        for tag, args, flags in (("one", [one], FLAGS), ("four", [four], FLAGS),
                                 ("graph", ["--graph-only", CONFIG], FLAGS),
                                 ("graph-fp8", ["--graph-only", CONFIG], ["--fp8-linears"]),
                                 ("graph-l3", ["--graph-only", CONFIG, "--layers", "3"], FLAGS)):
            out = os.path.join(tmp, "x-" + tag)
            r = run(os.path.join(HERE, "export.py"), *args, out, *flags)
            check(r.returncode == 0, f"export.py {tag}: {r.stderr.strip()}")
            exports[tag] = out
        for tag in ("one", "four"):
            for suffix in ("model.onnx", "model.onnx.data"):
                with open(os.path.join(exports["one"], suffix), "rb") as f1, \
                        open(os.path.join(exports[tag], suffix), "rb") as f2:
                    check(f1.read() == f2.read(), f"export of --jobs {tag}: {suffix} differs")

        layout = os.path.join(HERE, "check_layout.py")
        r = run(layout, exports["graph"], exports["four"])
        check(r.returncode == 0 and "same layout" in r.stdout, f"check_layout rejected a match: {r.stderr}")
        # The graph-only data file is not needed: its size comes from the graph.
        os.unlink(os.path.join(exports["graph"], "model.onnx.data"))
        r = run(layout, exports["graph"], exports["four"])
        check(r.returncode == 0, f"check_layout needs the graph-only data file: {r.stderr}")
        r = run(layout, exports["graph-fp8"], exports["four"])
        check(r.returncode == 1 and "experts" in r.stderr, f"check_layout missed FP4 vs float experts: {r.stderr}")
        r = run(layout, exports["graph-l3"], exports["four"])
        check(r.returncode == 1 and "weights" in r.stderr, f"check_layout missed other layers: {r.stderr}")
        # A constant computed to another last bit (another numpy or onnx)
        # only warns: the artifact keeps the graph-only export's.
        m = onnx.load(os.path.join(exports["four"], "model.onnx"), load_external_data=False)
        c = next(t for t in m.graph.initializer if t.data_location != onnx.TensorProto.EXTERNAL and t.raw_data)
        c.raw_data = bytes([c.raw_data[0] ^ 1]) + c.raw_data[1:]
        bumped = os.path.join(tmp, "x-bumped")
        os.makedirs(bumped)
        onnx.save(m, os.path.join(bumped, "model.onnx"))
        os.link(os.path.join(exports["four"], "model.onnx.data"), os.path.join(bumped, "model.onnx.data"))
        r = run(layout, exports["graph"], bumped)
        check(r.returncode == 0 and "warning: 1 constant(s) differ" in r.stderr,
              f"check_layout on a constant's last bit: rc {r.returncode}, {r.stderr}")
        # Same names and shapes but one weight's bytes elsewhere (a data file
        # of another size): the size check names it.
        with open(os.path.join(exports["four"], "model.onnx.data"), "ab") as f:
            f.write(b"\0" * 64)
        r = run(layout, exports["graph"], exports["four"])
        check(r.returncode == 1 and "bytes" in r.stderr, f"check_layout missed a data file size: {r.stderr}")

    if failures:
        for f in failures:
            print("FAIL:", f)
        sys.exit(1)
    print("test_layout: PASS")


if __name__ == "__main__":
    main()
