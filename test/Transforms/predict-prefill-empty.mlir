// RUN: h20-opt %s --h20-predict-prefill="targets=h200 gpus=1 output=%t.json" -o /dev/null | FileCheck %s
// RUN: %python -c "import json, sys; d = json.load(open(sys.argv[1])); print(d['predictions'][0]['tflops_per_gpu'], sorted(d['kernel_rates']))" %t.json | FileCheck %s --check-prefix=JSON

// A module without work (what bench scripts pass to read kernel_rates):
// a zero rate, not NaN, so the JSON stays valid.
// CHECK: target=h200 gpus=1 predicted_ms=0.000
// JSON: 0 ['h200']
module {
}
