"""ort_cases.py ORT_RUN CASES_DIR OUT_DIR [--against DIR] [--compare-args "ARGS"]

Runs every ONNX backend-test case in CASES_DIR (model.onnx +
test_data_set_0/input_J.pb, output_J.pb, as make_op_cases.py writes them)
with ONNX Runtime through ORT_RUN (scripts/ort-run.sh): the inputs are
written as OUT_DIR/<case>/in/NAME.npy, ONNX Runtime's outputs land in
OUT_DIR/<case>/ort/NAME.npy. Each output is then compared with
tensor-compare (from PATH; ARGS, default "--atol 1e-5 --rtol 1e-5") against
the case's reference output_J.pb, and with --against DIR also against
DIR/<case>/output_J.pb (h20's outputs, as run-conformance.sh leaves them).
Prints "<case> PASS" or "<case> FAIL <what>: <reason>" per case, then a
total line; exits 0 (the lines say what failed). Needs onnx and numpy."""
import os
import shlex
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t


def first_line(text):
    return (text.strip().splitlines() or [""])[0][:160]


def run_case(ort_run, case_dir, out_dir, against, compare_args):
    """The case's verdict: None when every output agrees, else why not."""
    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    data = os.path.join(case_dir, "test_data_set_0")
    in_dir, ort_dir = os.path.join(out_dir, "in"), os.path.join(out_dir, "ort")
    os.makedirs(in_dir, exist_ok=True)
    args = [ort_run, os.path.join(case_dir, "model.onnx"), "--output-dir", ort_dir]
    for j, value in enumerate(model.graph.input):
        t = read_pb(os.path.join(data, "input_%d.pb" % j))
        path = os.path.join(in_dir, value.name + ".npy")
        np.save(path, numpy_helper.to_array(t))
        args += ["--input", "%s=%s" % (value.name, path)]
    run = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if run.returncode != 0:
        return "ort: " + first_line(run.stdout)
    for j, value in enumerate(model.graph.output):
        got = os.path.join(ort_dir, value.name + ".npy")
        refs = [("ref", os.path.join(data, "output_%d.pb" % j))]
        if against:
            refs.append(("h20", os.path.join(against, "output_%d.pb" % j)))
        for what, ref in refs:
            cmp = subprocess.run(["tensor-compare", got, ref] + compare_args,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if cmp.returncode != 0:
                return "%s vs %s: %s" % (value.name, what, first_line(cmp.stdout))
    return None


def main(argv):
    ort_run, cases, out = argv[1], argv[2], argv[3]
    against, compare_args = None, ["--atol", "1e-5", "--rtol", "1e-5"]
    rest = argv[4:]
    while rest:
        if rest[0] == "--against":
            against, rest = rest[1], rest[2:]
        elif rest[0] == "--compare-args":
            compare_args, rest = shlex.split(rest[1]), rest[2:]
        else:
            sys.exit("ort_cases.py: unknown argument " + rest[0])
    passed = total = 0
    for name in sorted(os.listdir(cases)):
        case_dir = os.path.join(cases, name)
        if not os.path.isfile(os.path.join(case_dir, "model.onnx")):
            continue
        total += 1
        why = run_case(ort_run, case_dir, os.path.join(out, name),
                       os.path.join(against, name) if against else None, compare_args)
        if why is None:
            passed += 1
            print(name, "PASS")
        else:
            print(name, "FAIL", why)
    print("onnxruntime: %d of %d cases agree" % (passed, total))


if __name__ == "__main__":
    main(sys.argv)
