#!/usr/bin/env bash
# One device command for the GPU regression: gpu-test.sh, then the issue-7
# benchmark (bench/run-bench.sh), each bounded so that both fit one
# 10-minute call of the device tool; results into $OUT (at most 8 files:
# gpu.txt, gpu-test.txt, gpu-tests.json, gpu-tests.log, bench.txt,
# bench-results.tgz).
#   On the build machine:
#     H20_BUNDLE_BENCH=1 H20_BENCH_TTFT_S="32768 131072" scripts/gpu-bundle.sh gpu-bundle
#     mkdir -p device && tar cf - gpu-bundle | xz -T2 -6 > device/bundle.tar.xz
#   On the GPU machine (carry device/bundle.tar.xz):
#     scripts/gpu-regression.sh [device/bundle.tar.xz]
# Knobs: BUDGET (s for both parts, default 550), T1 (s for gpu-test.sh,
# default 330), SECTIONS (benchmark sections, default "A B C"), TTFT_S
# (default "32768 131072"), GPU_SECTIONS (gpu-test.sh's, default kernels
# fixtures conformance deepseek seed2).
set -u
tarball=$(realpath "${1:-device/bundle.tar.xz}")
out=${OUT:?set OUT to the folder the results go to}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
t0=$(date +%s)
tar xJf "$tarball" -C /tmp
cd /tmp/gpu-bundle || exit 1
H20_GPU_SECTIONS="${GPU_SECTIONS:-kernels fixtures conformance deepseek seed2}" \
  timeout "${T1:-330}" ./gpu-test.sh /tmp/gpu-bundle >"$out/gpu-test.txt" 2>&1
echo "gpu-test rc=$? after $(($(date +%s) - t0)) s" | tee -a "$out/gpu-test.txt"
cp results/gpu-tests.json results/gpu-tests.log "$out/" 2>/dev/null
left=$((${BUDGET:-550} - ($(date +%s) - t0)))
echo "bench budget $left s"
env -u OUT H20_BENCH_SECTIONS="${SECTIONS:-A B C}" H20_BENCH_TTFT_S="${TTFT_S:-32768 131072}" \
  H20_BENCH_RUNS=3 timeout "$left" ./bench/run-bench.sh /tmp/gpu-bundle >"$out/bench.txt" 2>&1
echo "bench rc=$? after $(($(date +%s) - t0)) s" | tee -a "$out/bench.txt"
tar czf "$out/bench-results.tgz" -C /tmp/h20-bench results 2>/dev/null
tail -40 "$out/gpu-test.txt"
tail -30 "$out/bench.txt"
