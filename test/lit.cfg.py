# Kiln lit configuration: runs every .mlir test under test/ with kiln-opt, FileCheck, not and count.
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "KILN"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kiln_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs"]  # Inputs: files the tests read

config.substitutions.append(("%PATH%", config.environment["PATH"]))
# The Python the build found (with onnx, numpy): for tests that make inputs or drive the Python importer.
config.substitutions.append(("%python", config.python_executable))
# The build's `kiln` package (PYTHONPATH), for tests that call the extension itself.
config.substitutions.append(("%kiln_python", os.path.join(config.kiln_obj_root, "python")))
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP", "ASAN_OPTIONS", "UBSAN_OPTIONS"])
# A sanitizer build (make test-sanitize): the tests that run python3, which is not instrumented, on the build's
# instrumented modules need the sanitizer runtimes preloaded; lit itself does not run with them.
if os.environ.get("KILN_TEST_PRELOAD"):
    config.environment["LD_PRELOAD"] = os.environ["KILN_TEST_PRELOAD"]
llvm_config.use_default_substitutions()

tool_dirs = [config.kiln_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(
    [ToolSubst(tool, unresolved="fatal") for tool in ("kiln-opt", "kiln-run", "kiln-runtime-check", "kilnc", "kiln-plan-fuzz", "kiln-opt-fuzz")],
    tool_dirs)

# ptxas (CUDA toolkit) assembles the generated PTX when present; those tests are skipped without it.
import shutil
ptxas = shutil.which("ptxas") or ("/usr/local/cuda/bin/ptxas" if os.access("/usr/local/cuda/bin/ptxas", os.X_OK) else None)
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.kiln_tools_dir, append_path=True)
