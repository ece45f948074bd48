"""sits.Tokenizer against the `tokenizers` package and transformers' chat
templates, on real tokenizer files; no GPU needed."""

import json
import shutil

import pytest

import sits
from conftest import BPE16K, MODEL_TOKENIZER

tokenizers = pytest.importorskip("tokenizers")


def test_ids_and_text_match_the_tokenizers_package(tiny_folder,
                                                   heldout_lines):
    ours = sits.Tokenizer.from_folder(str(tiny_folder))
    reference = tokenizers.Tokenizer.from_file(str(MODEL_TOKENIZER))
    assert len(heldout_lines) > 5
    for line in heldout_lines:
        ids = reference.encode(line).ids
        assert ours.encode(line) == ids, line
        assert ours.encode(line.encode("utf-8")) == ids, line
        assert ours.decode(ids) == reference.decode(ids), line
        plain = reference.encode(line, add_special_tokens=False).ids
        assert ours.encode(line, add_special_tokens=False) == plain, line


def test_special_tokens_and_properties(tiny_folder):
    tokenizer = sits.Tokenizer.from_folder(str(tiny_folder))
    assert tokenizer.kind == "byte-level BPE"
    assert tokenizer.vocab_size == 512
    assert tokenizer.bos_token == "<|begin_of_text|>"
    assert tokenizer.eos_token == "<|eot_id|>"
    assert tokenizer.bos_token_id == tokenizer.token_to_id("<|begin_of_text|>")
    assert sorted(tokenizer.eos_token_ids) == [508, 511]
    assert tokenizer.has_chat_template
    assert "<|start_header_id|>" in tokenizer.chat_template
    assert tokenizer.token_to_id("<|no such token|>") is None
    assert tokenizer.id_to_token(507) == "<|begin_of_text|>"
    assert tokenizer.id_to_token(10**6) is None
    ids = tokenizer.encode("<|begin_of_text|>hi<|eot_id|>",
                           add_special_tokens=False)
    assert ids[0] == 507 and tokenizer.decode(ids) == "hi"
    assert tokenizer.decode(ids, skip_special_tokens=False) == (
        "<|begin_of_text|>hi<|eot_id|>")
    assert "byte-level BPE" in repr(tokenizer)


def test_chat_template_matches_transformers(tiny_folder):
    transformers = pytest.importorskip("transformers")
    reference = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(tiny_folder / "tokenizer.json"),
        bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")
    reference.chat_template = json.loads(
        (tiny_folder / "tokenizer_config.json").read_text())["chat_template"]
    ours = sits.Tokenizer.from_folder(str(tiny_folder))
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Ça va? 日本語 😀"},
        {"role": "assistant", "content": "Oui."},
        {"role": "user", "content": "def f(x):\n    return x"},
    ]
    for add in (True, False):
        text = reference.apply_chat_template(messages, tokenize=False,
                                             add_generation_prompt=add)
        assert ours.apply_chat_template(messages, add_generation_prompt=add,
                                        tokenize=False) == text
        ids = reference.apply_chat_template(messages, tokenize=True,
                                            add_generation_prompt=add,
                                            return_dict=True)["input_ids"]
        assert ours.apply_chat_template(messages, add_generation_prompt=add,
                                        tokenize=True) == list(ids)
    # Extra keywords reach the template as variables.
    text = reference.apply_chat_template(messages[1:2], tokenize=False,
                                         date_string="1 Jan 2026")
    assert ours.apply_chat_template(messages[1:2], tokenize=False,
                                    date_string="1 Jan 2026") == text
    assert ours.apply_chat_template(messages[1:2]) == reference(
        text, add_special_tokens=False)["input_ids"]


@pytest.mark.skipif(not (BPE16K / "tokenizer.json").exists(),
                    reason="the shared llama_bpe16k model is not here")
def test_trained_bpe16k_prompt_matches_greedy_json():
    greedy = json.loads((BPE16K / "greedy.json").read_text())
    tokenizer = sits.Tokenizer.from_folder(str(BPE16K))
    reference = tokenizers.Tokenizer.from_file(str(BPE16K / "tokenizer.json"))
    prompt_ids = greedy["prompt"]
    prompt = reference.decode(prompt_ids)
    assert tokenizer.decode(prompt_ids) == prompt
    assert tokenizer.encode(prompt) == reference.encode(prompt).ids
    assert tokenizer.decode(greedy["greedy"]) == reference.decode(
        greedy["greedy"])
    for line in (BPE16K / "heldout.txt").read_text().splitlines()[:200]:
        assert tokenizer.encode(line) == reference.encode(line).ids, line


def test_errors_carry_their_codes(tiny_folder, tmp_path):
    tokenizer = sits.Tokenizer.from_folder(str(tiny_folder))
    with pytest.raises(sits.Error) as error:
        tokenizer.encode(b"ok \xff\xfe broken")
    assert error.value.code == sits.ErrorCode.InvalidText
    assert "UTF-8" in str(error.value)

    with pytest.raises(sits.Error) as error:
        sits.Tokenizer.from_folder(str(tmp_path / "missing"))
    assert error.value.code == sits.ErrorCode.InvalidTokenizer

    (tmp_path / "tokenizer.json").write_text(
        json.dumps({"model": {"type": "Unigram", "vocab": []}}))
    with pytest.raises(sits.Error) as error:
        sits.Tokenizer.from_folder(str(tmp_path))
    assert error.value.code == sits.ErrorCode.InvalidTokenizer
    assert "Unigram" in str(error.value)

    shutil.copy(MODEL_TOKENIZER, tmp_path / "tokenizer.json")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({
        "chat_template":
        "{% if messages[0].role != 'user' %}"
        "{{ raise_exception('the first message must be the user') }}"
        "{% endif %}{{ messages[0].content }}"
    }))
    strict = sits.Tokenizer.from_folder(str(tmp_path))
    assert strict.apply_chat_template([{"role": "user", "content": "x"}],
                                      tokenize=False) == "x"
    with pytest.raises(sits.Error) as error:
        strict.apply_chat_template([{"role": "system", "content": "x"}],
                                   tokenize=False)
    assert error.value.code == sits.ErrorCode.TemplateError
    assert "the first message must be the user" in str(error.value)

    with pytest.raises(TypeError):
        tokenizer.encode(42)
    with pytest.raises(TypeError):
        tokenizer.decode(["a"])
    with pytest.raises(TypeError):
        tokenizer.apply_chat_template("hello")
    assert isinstance(error.value, RuntimeError)
