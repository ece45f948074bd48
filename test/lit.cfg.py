# lit configuration for the sits test suite.
#
# Features tests can REQUIRE:
#   cuda           a CUDA GPU is present (GPU tests skip cleanly without one)
#   cuda-sm90      ... of compute capability 9.0 or newer (Hopper)
#   runtime        the CUDA runtime (sits-run) was built
#   python-onnx    python3 with onnx, onnxruntime and numpy (test helpers)
#   python-tokenizers  python3 with the `tokenizers` package (BPE test text)
#   python-transformers  python3 with transformers, jinja2 and tokenizers
#                  (chat templates compared with apply_chat_template)
#   shared-models  ../shared/models exists (models too large to commit)
#   asan           the build uses AddressSanitizer
#   nvrtc          libnvrtc.so.13 loads (sitsc compiles kernels with it)

import os
import shutil
import subprocess

import lit.formats

config.name = "sits"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test", ".onnxtxt"]
# lit matches these names in every folder: test/models (data) holds no file
# with a test suffix, so it is not excluded by name, which would also drop
# test/frontends/onnx/models.
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py",
                   "tools", "unit"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.sits_obj_root, "test")

# Our tools first, then FileCheck/not/split-file from LLVM.
path = [config.sits_tools_dir, config.llvm_tools_dir, os.environ.get("PATH", "")]
config.environment["PATH"] = os.pathsep.join(path)
for var in ("HOME", "TMPDIR", "CUDA_VISIBLE_DEVICES", "PYTHONPATH"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.environment["PYTHONUNBUFFERED"] = "1"

# A test that hangs fails alone, by name, after this many seconds, instead
# of the whole suite running into ctest's limit with nothing to show. lit
# needs psutil for it (scripts/install-deps.sh installs it).
try:
    import psutil  # noqa: F401

    lit_config.maxIndividualTestTime = 900
except ImportError:
    lit_config.note("psutil is missing: no per-test time limit")

models_dir = os.path.join(config.sits_src_root, "test", "models")
tools_dir = os.path.join(config.sits_src_root, "test", "tools")
config.substitutions.append(("%models", models_dir))
config.substitutions.append(("%testtools", tools_dir))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%shared_models", config.sits_shared_models))
config.substitutions.append(("%sits_obj", config.sits_obj_root))
config.substitutions.append(("%sits_tools", config.sits_tools_dir))
config.substitutions.append(("%sits_src", config.sits_src_root))


def has_gpu():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def gpu_compute_capability():
    """The first GPU's compute capability as an int (90 for sm_90), or 0."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap",
                              "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)
        major, minor = out.stdout.split()[0].split(".")
        return int(major) * 10 + int(minor)
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return 0


def has_python_modules(*names):
    code = "import " + ", ".join(names)
    try:
        out = subprocess.run([config.python_executable, "-c", code],
                             capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0


if config.sits_build_runtime:
    config.available_features.add("runtime")
    if has_gpu():
        config.available_features.add("cuda")
        # Programmatic dependent launch needs sm_90 or newer.
        if gpu_compute_capability() >= 90:
            config.available_features.add("cuda-sm90")
if has_python_modules("onnx", "onnxruntime", "numpy"):
    config.available_features.add("python-onnx")
if has_python_modules("tokenizers"):
    config.available_features.add("python-tokenizers")
if has_python_modules("transformers", "jinja2", "tokenizers"):
    config.available_features.add("python-transformers")
if config.sits_shared_models and os.path.isdir(config.sits_shared_models):
    config.available_features.add("shared-models")
if config.sits_asan:
    config.available_features.add("asan")
    # Debian's static LLVM libraries are not instrumented; ASan's container
    # checks then misfire inside MLIRContext's constructor.
    config.environment["ASAN_OPTIONS"] = "allow_user_poisoning=0"


def has_nvrtc():
    # The places sitsc looks (backends/cuda/Nvrtc.cpp), then the default
    # library path.
    import ctypes
    candidates = []
    explicit = os.environ.get("SITS_NVRTC_PATH")
    if explicit:
        candidates.append(explicit)
    else:
        for var in ("CUDA_HOME", "CUDA_PATH"):
            if os.environ.get(var):
                candidates.append(os.path.join(os.environ[var], "lib64",
                                               "libnvrtc.so.13"))
        candidates += ["/usr/local/cuda/lib64/libnvrtc.so.13",
                       "libnvrtc.so.13"]
    for candidate in candidates:
        if os.sep in candidate and not os.path.exists(candidate):
            continue
        try:
            ctypes.CDLL(candidate)
            return True
        except OSError:
            continue
    return False


if has_nvrtc():
    config.available_features.add("nvrtc")
for var in ("SITS_NVRTC_PATH", "CUDA_HOME", "CUDA_PATH"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
