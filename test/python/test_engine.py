"""sits.Engine and sits.Tokenizer.from_engine on engines compiled by sitsc.

The tokenizer parts need no GPU. The generation parts run where a GPU is
present (they skip cleanly elsewhere) and are checked against the real
sits-run on the same engine: the same ids, and the text the tokenizer
decodes from them.
"""

import json
import re
import subprocess
import sys

import numpy as np

import pytest

import sits
from conftest import (BPE16K, MODELS, TEST_DIR, compile_engine, open_engine,
                      tool)

PROMPTS = ["The quick brown fox", "Ça va? 日本語 😀", "def main(argv):\n  "]


def sits_run_ids(engine, *args):
    """Prompt ids and generated ids of sequence 0 from `sits-run
    --print-ids`, and what it printed to stdout."""
    run = subprocess.run([tool("sits-run"), str(engine), "--print-ids",
                          *args], capture_output=True)
    assert run.returncode == 0, run.stderr.decode()
    err = run.stderr.decode()

    def ids(label):
        line = re.search(r"^" + re.escape(label) + r": ?(.*)$", err, re.M)
        assert line, err
        return [int(x) for x in line.group(1).split()]

    return ids("prompt ids"), ids("tokens[0]"), run.stdout.decode("utf-8")


# --- without a GPU ---------------------------------------------------------


def test_tokenizer_from_engine_equals_the_folder(tiny_engine, tiny_folder,
                                                 heldout_lines):
    stored = sits.Tokenizer.from_engine(str(tiny_engine))
    folder = sits.Tokenizer.from_folder(str(tiny_folder))
    assert stored.vocab_size == folder.vocab_size
    assert stored.chat_template == folder.chat_template
    assert stored.eos_token_ids == folder.eos_token_ids
    for line in heldout_lines:
        assert stored.encode(line) == folder.encode(line)


def test_engine_without_tokenizer(bare_engine):
    with pytest.raises(sits.Error) as error:
        sits.Tokenizer.from_engine(str(bare_engine))
    assert error.value.code == sits.ErrorCode.NoTokenizer
    assert "token ids" in str(error.value)


def test_bad_engine_files(tmp_path, tiny_engine):
    for name, content in [("text.sits", b"hello"),
                          ("cut.sits", tiny_engine.read_bytes()[:4096])]:
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(sits.Error) as error:
            sits.Tokenizer.from_engine(str(path))
        assert error.value.code == sits.ErrorCode.InvalidEngine
        assert name in str(error.value)
    with pytest.raises(sits.Error) as error:
        sits.Engine(str(tmp_path / "missing.sits"))
    assert error.value.code in (sits.ErrorCode.InvalidEngine,
                                sits.ErrorCode.NoGpu)


# --- on a GPU --------------------------------------------------------------


@pytest.fixture(scope="module")
def engine(tiny_engine):
    return open_engine(tiny_engine)


def test_engine_properties(engine, tiny_folder):
    assert engine.max_batch == 2 and engine.max_seq_len == 96
    assert engine.vocab_size >= engine.tokenizer.vocab_size
    assert engine.tokenizer.eos_token_ids == sits.Tokenizer.from_folder(
        str(tiny_folder)).eos_token_ids
    assert engine.device_name


@pytest.mark.parametrize("prompt", PROMPTS)
def test_generate_matches_sits_run(engine, tiny_engine, prompt):
    result = engine.generate(prompt, max_new_tokens=12, ignore_eos=True)
    prompt_ids, ids, stdout = sits_run_ids(tiny_engine, "--prompt", prompt,
                                           "--max-new-tokens", "12",
                                           "--ignore-eos")
    assert result.prompt_token_ids == prompt_ids
    assert result.token_ids == ids
    assert result.text == engine.tokenizer.decode(ids)
    assert stdout.rstrip("\n") == result.text.rstrip("\n")
    assert result.finish_reason == "length"
    stats = result.stats
    assert stats.prompt_tokens == len(prompt_ids)
    assert stats.generated_tokens == 12 and stats.tokens_per_second > 0


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_text_matches_onnxruntime(engine, prompt):
    """The fp32 engine's greedy stream equals onnxruntime's on the ONNX model
    itself (full recomputation each step), from the tokenizer's ids."""
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(MODELS / "llama_gqa" / "model.onnx"),
                                   providers=["CPUExecutionProvider"])
    ids = engine.tokenizer.encode(prompt)
    expected = []
    for _ in range(12):
        logits = session.run(None, {"input_ids": np.array([ids + expected],
                                                          dtype=np.int64)})[0]
        expected.append(int(np.argmax(logits[0, -1])))
    result = engine.generate(prompt, max_new_tokens=12, ignore_eos=True)
    assert result.prompt_token_ids == ids
    assert result.token_ids == expected
    assert result.text == engine.tokenizer.decode(expected)


def test_generate_from_ids_and_bytes(engine):
    text = engine.generate(PROMPTS[0], max_new_tokens=8, ignore_eos=True)
    ids = engine.generate(text.prompt_token_ids, max_new_tokens=8,
                          ignore_eos=True)
    raw = engine.generate(PROMPTS[0].encode(), max_new_tokens=8,
                          ignore_eos=True)
    assert ids.token_ids == text.token_ids == raw.token_ids


def test_batch_equals_single_runs(engine):
    singles = [engine.generate(p, max_new_tokens=10, ignore_eos=True)
               for p in PROMPTS[:2]]
    batch = engine.generate(PROMPTS[:2], max_new_tokens=10, ignore_eos=True)
    assert [g.token_ids for g in batch] == [g.token_ids for g in singles]
    assert [g.text for g in batch] == [g.text for g in singles]


def test_stream_pieces_make_the_text(engine):
    whole = engine.generate(PROMPTS[1], max_new_tokens=16, ignore_eos=True)
    stream = engine.stream(PROMPTS[1], max_new_tokens=16, ignore_eos=True)
    pieces = list(stream)
    assert "".join(pieces) == whole.text
    assert all(pieces)  # never an empty or half-character piece
    assert stream.result.token_ids == whole.token_ids


def test_stream_closed_early(engine):
    stream = engine.stream(PROMPTS[0], max_new_tokens=40, ignore_eos=True)
    next(stream)
    stream.close()
    assert len(list(stream)) < 40


def test_stop_string_ends_the_text_before_it(engine):
    whole = engine.generate(PROMPTS[0], max_new_tokens=24, ignore_eos=True)
    if len(whole.text) < 4:
        pytest.skip("the model's continuation is too short to cut")
    stop = whole.text[len(whole.text) // 2:len(whole.text) // 2 + 2]
    cut = engine.generate(PROMPTS[0], max_new_tokens=24, ignore_eos=True,
                          stop=[stop])
    assert cut.finish_reason == "stop"
    assert cut.text == whole.text[:whole.text.index(stop)]
    assert stop not in cut.text


def test_chat_uses_the_template(engine, tiny_engine):
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hello!"}]
    result = engine.chat(messages, max_new_tokens=8, ignore_eos=True)
    expected = engine.tokenizer.apply_chat_template(
        messages, add_generation_prompt=True)
    assert result.prompt_token_ids == expected
    prompt_ids, ids, _ = sits_run_ids(tiny_engine, "--system", "Be brief.",
                                      "--chat", "Hello!",
                                      "--max-new-tokens", "8", "--ignore-eos")
    assert prompt_ids == expected and ids == result.token_ids


def test_sits_run_stop_and_chat_errors(engine, tiny_engine, bare_engine):
    whole = engine.generate(PROMPTS[0], max_new_tokens=24, ignore_eos=True)
    stop = whole.text[len(whole.text) // 2:len(whole.text) // 2 + 2]
    run = subprocess.run([tool("sits-run"), str(tiny_engine), "--prompt",
                          PROMPTS[0], "--max-new-tokens", "24", "--ignore-eos",
                          "--stop", stop, "--print-ids"], capture_output=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.decode().rstrip("\n") == whole.text[:whole.text.index(
        stop)].rstrip("\n")
    assert b"finish[0]: stop" in run.stderr
    run = subprocess.run([tool("sits-run"), str(bare_engine), "--prompt",
                          "hi"], capture_output=True)
    assert run.returncode != 0
    assert b"no tokenizer" in run.stderr


def test_sampling_is_reproducible(engine):
    one = engine.generate(PROMPTS[0], max_new_tokens=16, temperature=0.8,
                          top_p=0.9, seed=7, ignore_eos=True)
    two = engine.generate(PROMPTS[0], max_new_tokens=16, temperature=0.8,
                          top_p=0.9, seed=7, ignore_eos=True)
    assert one.token_ids == two.token_ids


def test_request_errors(engine, bare_engine):
    cases = [
        (dict(prompt="x", max_new_tokens=0), sits.ErrorCode.InvalidArgument),
        (dict(prompt="x", top_k=-1), sits.ErrorCode.InvalidArgument),
        (dict(prompt=[10**6]), sits.ErrorCode.TokenOutOfVocab),
        (dict(prompt=b"\xff\xfe"), sits.ErrorCode.InvalidText),
        (dict(prompt="x" * 4000), sits.ErrorCode.PromptTooLong),
        (dict(prompt=["a", "b", "c"]), sits.ErrorCode.InvalidArgument),
    ]
    for kwargs, code in cases:
        prompt = kwargs.pop("prompt")
        with pytest.raises(sits.Error) as error:
            engine.generate(prompt, **kwargs)
        assert error.value.code == code, (prompt, kwargs, str(error.value))
    with pytest.raises(TypeError):
        engine.generate(3.5)
    bare = open_engine(bare_engine)
    assert bare.tokenizer is None
    ids = bare.generate([1, 2, 3], max_new_tokens=4, ignore_eos=True)
    assert len(ids.token_ids) == 4 and ids.text == ""
    assert ids.finish_reason == "length"
    with pytest.raises(sits.Error) as error:
        bare.generate([1, 2, 3], stop=["x"])
    assert error.value.code == sits.ErrorCode.NoTokenizer
    with pytest.raises(sits.Error) as error:
        bare.generate("text needs a tokenizer")
    assert error.value.code == sits.ErrorCode.NoTokenizer


def test_trained_model_writes_what_sits_run_writes(bpe16k_engine):
    """The fp16 engine continues greedy.json's prompt (its decoded text) with
    the reference's 48 greedy tokens, and sits-run writes the same."""
    greedy = json.loads((BPE16K / "greedy.json").read_text())
    path = bpe16k_engine
    engine = open_engine(path)
    prompt = engine.tokenizer.decode(greedy["prompt"])
    result = engine.generate(prompt, max_new_tokens=48)
    assert result.prompt_token_ids == greedy["prompt"]
    assert result.token_ids == greedy["greedy"]
    prompt_ids, ids, stdout = sits_run_ids(path, "--prompt", prompt,
                                           "--max-new-tokens", "48")
    assert (result.prompt_token_ids, result.token_ids) == (prompt_ids, ids)
    assert stdout.rstrip("\n") == result.text.rstrip("\n")
    assert result.text == engine.tokenizer.decode(greedy["greedy"])


def test_python_example_runs(tiny_engine):
    """examples/python/chat.py end to end: a reply with a GPU, a clear
    error naming the cause without one."""
    script = TEST_DIR.parent / "examples" / "python" / "chat.py"
    run = subprocess.run([sys.executable, str(script), str(tiny_engine),
                          "Hello!"], capture_output=True, text=True)
    assert "byte-level BPE" in run.stderr  # the tokenizer, read without a GPU
    try:
        sits.Engine(str(tiny_engine))
    except sits.Error as error:
        if error.code != sits.ErrorCode.NoGpu:
            raise
        assert run.returncode != 0
        assert "(NoGpu)" in run.stderr
        return
    assert run.returncode == 0, run.stderr
    assert "[length]" in run.stderr or "[eos]" in run.stderr
