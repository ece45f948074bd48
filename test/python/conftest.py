"""Fixtures of the `sits` package's tests: real tokenizer files, engines
compiled by the real sitsc, and the real sits-run as the GPU reference.

ctest runs these with PYTHONPATH=<build>/python and SITS_BIN_DIR=<build>/bin;
engine tests skip without sitsc, GPU tests skip without a GPU.
"""

import json
import os
import pathlib
import shutil
import subprocess

import pytest

import sits

TEST_DIR = pathlib.Path(__file__).resolve().parent.parent
MODELS = TEST_DIR / "models"
# A Llama-3-shaped tokenizer with as many ids as the test models' vocabulary
# (512), so that every id they produce decodes to text.
MODEL_TOKENIZER = (TEST_DIR / "runtime" / "tokenizer" / "Inputs" /
                   "llama3-512.json")
LLAMA3_TEMPLATE = (TEST_DIR / "runtime" / "chat" / "Inputs" / "templates" /
                   "llama3.jinja")
HELDOUT = TEST_DIR / "runtime" / "tokenizer" / "Inputs" / "heldout.txt"
SHARED_MODELS = pathlib.Path(
    os.environ.get("SITS_SHARED_MODELS_DIR", TEST_DIR.parent.parent / "shared" /
                   "models"))
BPE16K = SHARED_MODELS / "llama_bpe16k"
# An engine of llama_bpe16k compiled elsewhere, for GPU machines that get the
# model's tokenizer files but not its 45 MB ONNX file
# (bench/device/bpe16k.sh).
BPE16K_ENGINE = os.environ.get("SITS_BPE16K_ENGINE")


def tool(name):
    """Path of a sits tool from SITS_BIN_DIR (or PATH); None if absent."""
    folder = os.environ.get("SITS_BIN_DIR")
    if folder and (pathlib.Path(folder) / name).exists():
        return str(pathlib.Path(folder) / name)
    return shutil.which(name)


@pytest.fixture(scope="session")
def tiny_folder(tmp_path_factory):
    """A Llama-3-shaped tokenizer folder: tokenizer.json, a config with the
    Llama-3 chat template and special tokens, and two EOS ids."""
    folder = tmp_path_factory.mktemp("llama3-512")
    shutil.copy(MODEL_TOKENIZER, folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(
        json.dumps({
            "bos_token": "<|begin_of_text|>",
            "eos_token": "<|eot_id|>",
            "chat_template": LLAMA3_TEMPLATE.read_text(),
        }))
    (folder / "generation_config.json").write_text(
        json.dumps({"eos_token_id": [508, 511]}))
    return folder


@pytest.fixture(scope="session")
def heldout_lines():
    return [l for l in HELDOUT.read_text(encoding="utf-8").splitlines() if l]


def compile_engine(out_dir, model, *args):
    sitsc = tool("sitsc")
    if sitsc is None:
        if os.environ.get("SITS_REQUIRE_GPU") == "1":
            pytest.fail("no sitsc on PATH or in SITS_BIN_DIR")
        pytest.skip("sitsc is not built")
    out = out_dir / (model.parent.name + ".sits")
    run = subprocess.run([sitsc, str(model), "-o", str(out), *args],
                         capture_output=True, text=True)
    if (run.returncode != 0 and "NVRTC" in run.stderr and
            os.environ.get("SITS_REQUIRE_GPU") != "1"):
        pytest.skip("sitsc cannot compile here: " + run.stderr.strip())
    assert run.returncode == 0, run.stderr
    return out


@pytest.fixture(scope="session")
def tiny_engine(tmp_path_factory, tiny_folder):
    """The llama_gqa test model with the Llama-3-shaped tokenizer inside."""
    return compile_engine(tmp_path_factory.mktemp("engines"),
                          MODELS / "llama_gqa" / "model.onnx",
                          "--tokenizer=" + str(tiny_folder),
                          "--dtype=fp32", "--max-seq-len=96", "--max-batch=2")


@pytest.fixture(scope="session")
def bpe16k_engine(tmp_path_factory):
    """The trained llama_bpe16k model in fp16 with its own tokenizer."""
    if BPE16K_ENGINE:
        return pathlib.Path(BPE16K_ENGINE)
    if not (BPE16K / "model.onnx").exists():
        pytest.skip("the shared llama_bpe16k model is not here")
    return compile_engine(tmp_path_factory.mktemp("bpe16k"),
                          BPE16K / "model.onnx", "--max-seq-len=256",
                          "--max-batch=1")


@pytest.fixture(scope="session")
def bare_engine(tmp_path_factory):
    """An engine without a tokenizer: it takes token ids only."""
    return compile_engine(tmp_path_factory.mktemp("bare"),
                          MODELS / "llama_gqa" / "model.onnx",
                          "--max-seq-len=64", "--max-batch=1")


def open_engine(path):
    """sits.Engine(path), or skip the test where no GPU is present (unless
    SITS_REQUIRE_GPU=1, as on the GPU machines, where that fails)."""
    try:
        return sits.Engine(str(path))
    except sits.Error as error:
        if (error.code in (sits.ErrorCode.NoGpu, sits.ErrorCode.WrongGpu) and
                os.environ.get("SITS_REQUIRE_GPU") != "1"):
            pytest.skip("no usable GPU: " + str(error))
        raise
