# lit configuration for h20's FileCheck tests.
import os

import lit.formats

config.name = "h20"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".onnxtext", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Unit"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.h20_obj_root, "test")

# Tools: ours first, then LLVM's FileCheck/not/count.
path = os.pathsep.join([config.h20_tools_dir, config.llvm_tools_dir,
                        config.environment.get("PATH", os.environ.get("PATH", ""))])
config.environment["PATH"] = path
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"
config.substitutions.append(("%h20_src", config.h20_src_root))

# The shared fixtures live beside the repository in development and CI; a test
# that needs them says `REQUIRES: fixtures`.
fixtures = os.path.join(config.h20_src_root, "..", "shared", "fixtures", "onnx")
if os.path.isdir(fixtures):
    config.available_features.add("fixtures")
    config.substitutions.append(("%fixtures", os.path.realpath(fixtures)))
