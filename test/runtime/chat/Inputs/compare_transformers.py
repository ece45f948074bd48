"""Compares sits' chat templates with transformers' apply_chat_template.

For every template in TEMPLATES_DIR and every conversation below (with and
without the generation prompt), renders with transformers (a
PreTrainedTokenizerFast built around a tiny in-memory `tokenizers`
tokenizer, so nothing is downloaded) and with `sits-render-template
--batch`, and compares byte for byte. sits renders the variables
transformers handed to its compiled template (recorded on the way in), so
the comparison is of the template engines alone. When transformers fails,
sits must fail too, and when it failed in raise_exception, sits' error must
hold that message. strftime_now is pinned to 2024-07-26 10:00:00 on both
sides.

usage: compare_transformers.py DRIVER TEMPLATES_DIR [--write-goldens FILE]

--write-goldens also saves transformers' results for check_goldens.py, which
needs neither transformers nor jinja2.
"""

import datetime as real_datetime
import json
import os
import subprocess
import sys
import tempfile

import jinja2
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast
from transformers.utils import chat_template_utils

NOW = "2024-07-26 10:00:00"

# Special tokens of each template family (bos, eos).
SPECIAL_TOKENS = {
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3.1": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3.2": ("<|begin_of_text|>", "<|eot_id|>"),
    "qwen2.5": (None, "<|im_end|>"),
    "qwen3": (None, "<|im_end|>"),
    "mistral-v0.1": ("<s>", "</s>"),
    "mistral-nemo": ("<s>", "</s>"),
    "gemma2": ("<bos>", "<eos>"),
    "gemma3": ("<bos>", "<eos>"),
    "phi3.5": ("<s>", "<|endoftext|>"),
    "tinyllama": ("<s>", "</s>"),
    "deepseek-r1-distill": ("<\uff5cbegin\u2581of\u2581sentence\uff5c>",
                            "<\uff5cend\u2581of\u2581sentence\uff5c>"),
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location \u2014 "
                       "use \"celsius\" by default",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string",
                             "description": "The city, e.g. Z\u00fcrich"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
            },
            "required": ["location"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {"type": "object",
                       "properties": {"query": {"type": "string"}},
                       "required": ["query"]},
    },
}

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
UNICODE_TEXT = ("H\u00e9llo \u201cw\u00f6rld\u201d 'single' \"double\" "
                "back\\slash\nnew line\ttab \U0001F389\U0001F680 \u65e5\u672c"
                "\u8a9e \u00a0nbsp {{ not a tag }} {% neither %}")
TOOL_CALL = {"id": "call12345", "type": "function",
             "function": {"name": "get_current_weather",
                          "arguments": {"location": "Paris", "days": 2}}}

CONVERSATIONS = {
    "single-user": {"messages": [{"role": "user", "content": "Hello!"}]},
    "system-user": {"messages": [SYSTEM,
                                 {"role": "user", "content": "What is 2+2?"}]},
    "multi-turn": {"messages": [
        SYSTEM, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."}]},
    "ends-with-assistant": {"messages": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello there."}]},
    "unicode-quotes-backslashes": {"messages": [
        {"role": "user", "content": UNICODE_TEXT},
        {"role": "assistant",
         "content": "\u00c7a va? \U0001F600\n\n```python\nprint('hi')\n```"},
        {"role": "user", "content": "  spaces around  \n"}]},
    "empty-content": {"messages": [
        {"role": "user", "content": ""},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "x"}]},
    "tools": {"messages": [SYSTEM, {"role": "user",
                                    "content": "Weather in Paris?"}],
              "tools": [WEATHER_TOOL, SEARCH_TOOL]},
    "tools-no-system": {"messages": [{"role": "user",
                                      "content": "Weather in Paris?"}],
                        "tools": [WEATHER_TOOL]},
    "tool-call-and-response": {"messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
        {"role": "tool", "tool_call_id": "call12345",
         "name": "get_current_weather",
         "content": "{\"temperature\": 22, \"unit\": \"celsius\"}"},
        {"role": "assistant", "content": "It is 22 \u00b0C in Paris."},
        {"role": "user", "content": "Thanks!"}],
        "tools": [WEATHER_TOOL]},
    "tool-call-pending": {"messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call12345", "type": "function",
             "function": {"name": "get_current_weather",
                          "arguments": "{\"location\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call12345",
         "content": "sunny"}],
        "tools": [WEATHER_TOOL]},
    "two-tool-calls": {"messages": [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": "", "tool_calls": [
            TOOL_CALL, {"id": "call67890", "type": "function",
                        "function": {"name": "get_current_weather",
                                     "arguments": {"location": "Rome"}}}]},
        {"role": "tool", "tool_call_id": "call12345", "content": "22"},
        {"role": "tool", "tool_call_id": "call67890", "content": "25"}],
        "tools": [WEATHER_TOOL]},
    "roles-not-alternating": {"messages": [
        {"role": "user", "content": "one"},
        {"role": "user", "content": "two"}]},
    "unknown-role": {"messages": [{"role": "narrator", "content": "Once"}]},
    "thinking-in-content": {"messages": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant",
         "content": "<think>\nAdd them.\n</think>\n\nIt is 4."},
        {"role": "user", "content": "And 3+3?"}]},
    "reasoning-content": {"messages": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "It is 4.",
         "reasoning_content": "Two plus two."}]},
    "no-thinking": {"messages": [{"role": "user", "content": "Hi"}],
                    "kwargs": {"enable_thinking": False}},
    "fixed-date-no-tools-in-user": {
        "messages": [SYSTEM, {"role": "user", "content": "Hi"}],
        "tools": [WEATHER_TOOL],
        "kwargs": {"date_string": "01 Jan 2025",
                   "tools_in_user_message": False}},
    "long": {"messages": [
        {"role": "user" if i % 2 == 0 else "assistant",
         "content": f"turn {i}: " + "word " * (i % 5)} for i in range(12)]},
}


class FixedDatetime(real_datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(2024, 7, 26, 10, 0, 0)


def make_tokenizer(template, bos, eos):
    vocab = {"<unk>": 0}
    for token in (bos, eos):
        if token is not None:
            vocab.setdefault(token, len(vocab))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(vocab=vocab,
                                                    unk_token="<unk>")),
        bos_token=bos, eos_token=eos, unk_token="<unk>")
    tokenizer.chat_template = template
    return tokenizer


def main():
    driver, templates_dir = sys.argv[1], sys.argv[2]
    goldens_path = None
    if len(sys.argv) == 5 and sys.argv[3] == "--write-goldens":
        goldens_path = sys.argv[4]

    recorded = []
    original_compile = chat_template_utils._compile_jinja_template

    class Recorder:
        def __init__(self, compiled):
            self.compiled = compiled

        def render(self, **kwargs):
            recorded.append(json.loads(json.dumps(kwargs)))
            return self.compiled.render(**kwargs)

    chat_template_utils._compile_jinja_template = (
        lambda source: Recorder(original_compile(source)))
    chat_template_utils.datetime = FixedDatetime

    failures = []
    counts = {"identical": 0, "both fail": 0, "raise_exception": 0}
    goldens = {"now": NOW, "conversations": {}, "cases": []}
    names = sorted(f[:-len(".jinja")] for f in os.listdir(templates_dir)
                   if f.endswith(".jinja"))
    for name in names:
        path = os.path.join(templates_dir, name + ".jinja")
        with open(path, encoding="utf-8") as f:
            template = f.read()
        tokenizer = make_tokenizer(template, *SPECIAL_TOKENS[name])
        cases = []
        for conv_name, conv in CONVERSATIONS.items():
            for generation_prompt in (True, False):
                recorded.clear()
                expected = error = None
                try:
                    expected = tokenizer.apply_chat_template(
                        conv["messages"], tools=conv.get("tools"),
                        tokenize=False,
                        add_generation_prompt=generation_prompt,
                        **conv.get("kwargs", {}))
                except Exception as e:  # noqa: BLE001 - an outcome
                    error = (type(e).__name__, str(e),
                             type(e) is jinja2.exceptions.TemplateError)
                if len(recorded) != 1:
                    failures.append(f"{name}/{conv_name}: transformers did "
                                    "not reach the template")
                    continue
                cases.append({"conversation": conv_name,
                              "name": f"{name}/{conv_name}/"
                                      f"gen={generation_prompt}",
                              "variables": recorded[0], "now": NOW,
                              "expected": expected, "error": error})
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False,
                                         encoding="utf-8") as f:
            json.dump([{"variables": c["variables"], "now": c["now"]}
                       for c in cases], f, ensure_ascii=False)
            batch = f.name
        out = subprocess.run([driver, "--batch", path, batch],
                             capture_output=True, check=True)
        os.unlink(batch)
        results = json.loads(out.stdout.decode("utf-8"))
        for case, got in zip(cases, results):
            # Goldens keep each conversation's variables once; a case adds
            # the generation prompt flag and the special tokens.
            shared = {k: v for k, v in case["variables"].items()
                      if k in ("messages", "tools", "documents")
                      or k in CONVERSATIONS[case["conversation"]].get(
                          "kwargs", {})}
            known = goldens["conversations"].setdefault(
                case["conversation"], shared)
            assert known == shared, case["name"]
            golden = {"template": name + ".jinja",
                      "conversation": case["conversation"],
                      "extra": {k: v for k, v in case["variables"].items()
                                if k not in shared}}
            if case["error"] is None:
                golden["output"] = case["expected"]
                if got.get("output") == case["expected"]:
                    counts["identical"] += 1
                else:
                    failures.append(
                        f"{case['name']}: transformers rendered "
                        f"{case['expected']!r}, sits {got!r}")
            else:
                kind, message, raised = case["error"]
                golden["error"] = message if raised else kind
                golden["raise_exception"] = raised
                if "error" not in got:
                    failures.append(f"{case['name']}: transformers failed "
                                    f"({kind}: {message}), sits rendered "
                                    f"{got['output']!r}")
                elif raised and message not in got["error"]:
                    failures.append(f"{case['name']}: sits' error "
                                    f"{got['error']!r} lacks {message!r}")
                else:
                    counts["both fail"] += 1
                    counts["raise_exception"] += raised
                    print(f"both fail: {case['name']}: {kind}: {message} | "
                          f"sits: {got['error']}")
            goldens["cases"].append(golden)
    for failure in failures:
        print("MISMATCH " + failure)
    total = counts["identical"] + counts["both fail"] + len(failures)
    print(f"{len(names)} templates, {total} renderings: "
          f"{counts['identical']} identical, {counts['both fail']} both fail "
          f"({counts['raise_exception']} in raise_exception), "
          f"{len(failures)} mismatches")
    if goldens_path:
        with open(goldens_path, "w", encoding="utf-8") as f:
            # Not sort_keys: dict order is data here (tojson keeps it).
            json.dump(goldens, f, ensure_ascii=False, indent=1)
            f.write("\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
