# lit configuration for h20's FileCheck tests.
import os

import lit.formats

config.name = "h20"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".onnxtext", ".test"]
config.excludes = ["Inputs", "lit-helpers", "expected-pass.txt", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Unit"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.h20_obj_root, "test")

# Tools: ours first, then LLVM's FileCheck/not/count.
path = os.pathsep.join([config.h20_tools_dir, config.llvm_tools_dir,
                        config.environment.get("PATH", os.environ.get("PATH", ""))])
config.environment["PATH"] = path
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"
config.substitutions.append(("%h20_src", config.h20_src_root))
# Binary ONNX models are written as protobuf text and encoded at test time.
config.substitutions.append(
    ("%onnx-encode", f"{config.protoc} --encode=onnx.ModelProto -I{config.onnx_proto_dir} onnx/onnx.proto"))
# `%expect-exit 2 cmd ...` passes iff cmd exits with code 2; output to stdout.
config.substitutions.append(
    ("%expect-exit", f"{config.python} {os.path.join(config.h20_src_root, 'test', 'Inputs', 'expect_exit.py')}"))
config.substitutions.append(("%python", config.python))

# Tests that build small models with the onnx Python package and compute
# their references with numpy say `REQUIRES: onnx-python` and run
# `%onnx-python`: the configured Python when it has both, else Debian's
# /usr/bin/python3 (python3-onnx and python3-numpy, from scripts/setup.sh).
import subprocess
for candidate in (config.python, "/usr/bin/python3"):
    try:
        found = subprocess.run([candidate, "-c", "import onnx, numpy"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    except OSError:
        found = False
    if found:
        config.available_features.add("onnx-python")
        config.substitutions.append(("%onnx-python", candidate))
        break

# Sanitizer builds (H20_SANITIZE, scripts/sanitize.sh): a test that cannot
# run under them says `UNSUPPORTED: asan` (e.g. `ulimit -v`: ASan reserves
# terabytes of address space for its shadow memory).
if "address" in getattr(config, "h20_sanitize", ""):
    config.available_features.add("asan")

# The shared fixtures live beside the repository in development and CI; a test
# that needs them says `REQUIRES: fixtures`.
conformance = os.path.join(config.h20_src_root, "..", "shared", "conformance", "onnx-node")
if os.path.isdir(conformance):
    config.available_features.add("conformance")
    config.substitutions.append(("%conformance", os.path.realpath(conformance)))
fixtures = os.path.join(config.h20_src_root, "..", "shared", "fixtures", "onnx")
if os.path.isdir(fixtures):
    config.available_features.add("fixtures")
    config.substitutions.append(("%fixtures", os.path.realpath(fixtures)))

# The GPU target needs NVRTC (attention kernel) and, to produce cubins,
# ptxas: both from the CUDA toolkit, optional on a CPU-only machine.
import glob
import shutil
cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
if shutil.which("ptxas") or os.path.exists(os.path.join(cuda_home, "bin", "ptxas")):
    config.available_features.add("ptxas")
if glob.glob(os.path.join(cuda_home, "lib64", "libnvrtc.so*")) or glob.glob("/usr/lib/x86_64-linux-gnu/libnvrtc.so*"):
    config.available_features.add("nvrtc")

# An NVIDIA GPU with its driver: tests of what h20-run says without one
# are UNSUPPORTED there.
if os.path.exists("/dev/nvidiactl"):
    config.available_features.add("gpu")

# ONNX Runtime (CPU) through onnxruntime-node, the second numerical oracle:
# scripts/setup.sh installs it into third_party/ort/. A test that runs
# `%ort-run` says `REQUIRES: ort`; without node or the package those tests are
# reported unsupported, and the reason is printed once here.
import subprocess
ort_run = os.path.join(config.h20_src_root, "scripts", "ort-run.sh")
try:
    probe = subprocess.run([ort_run, "--version"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=120)
    ort_ok, ort_why = probe.returncode == 0, probe.stdout.decode(errors="replace").strip()
except (OSError, subprocess.TimeoutExpired) as e:
    ort_ok, ort_why = False, str(e)
if ort_ok:
    config.available_features.add("ort")
    config.substitutions.append(("%ort-run", ort_run))
else:
    lit_config.note(f"tests that need ONNX Runtime (REQUIRES: ort) are unsupported: {ort_why}")
