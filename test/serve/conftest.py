"""Fixtures of the serving tests: sits-serve-reference (the OpenAI-compatible
server over the CPU reference executor) started on a free port with the
llama_gqa test model and a Llama-3-shaped tokenizer, and sits-exec as the
reference of its greedy tokens.

ctest runs these with SITS_BIN_DIR=<build>/bin. Without the `openai` package
they skip (it is the client under test: pip install openai).
"""

import concurrent.futures
import json
import os
import pathlib
import re
import select
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

openai = pytest.importorskip(
    "openai", reason="the serving tests need the openai package "
    "(pip install openai)")

TEST_DIR = pathlib.Path(__file__).resolve().parent.parent
MODEL = TEST_DIR / "models" / "llama_gqa" / "model.onnx"
TOKENIZER = TEST_DIR / "runtime" / "tokenizer" / "Inputs" / "llama3-512.json"
TEMPLATE = TEST_DIR / "runtime" / "chat" / "Inputs" / "templates" / "llama3.jinja"
MODEL_NAME = "llama-gqa-test"
# The pipeline options of every server and of sits-exec's reference runs.
MAX_SEQ_LEN = 128
PIPELINE = ["--max-seq-len=%d" % MAX_SEQ_LEN]


def tool(name):
    """Path of a sits tool from SITS_BIN_DIR (or PATH); skips if absent."""
    folder = os.environ.get("SITS_BIN_DIR")
    if folder and (pathlib.Path(folder) / name).exists():
        return str(pathlib.Path(folder) / name)
    found = shutil.which(name)
    if found is None:
        pytest.skip(name + " is not built")
    return found


@pytest.fixture(scope="session")
def tokenizer_folder(tmp_path_factory):
    """tokenizer.json, a config with the Llama-3 chat template and special
    tokens, and two EOS ids (as test/python's tiny_folder)."""
    folder = tmp_path_factory.mktemp("llama3-512")
    shutil.copy(TOKENIZER, folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(
        json.dumps({
            "bos_token": "<|begin_of_text|>",
            "eos_token": "<|eot_id|>",
            "chat_template": TEMPLATE.read_text(),
        }))
    (folder / "generation_config.json").write_text(
        json.dumps({"eos_token_id": [508, 511]}))
    return folder


class ServerDidNotStart(AssertionError):

    def __init__(self, message, exit_code):
        super().__init__(message)
        self.exit_code = exit_code


class ServerProcess:
    """A running sits-serve-reference; stop() checks it exits cleanly."""

    def __init__(self, command, log_path):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE,
                                        stderr=self.log, text=True)
        line = ""
        deadline = time.time() + 120
        while time.time() < deadline and self.process.poll() is None:
            ready, _, _ = select.select([self.process.stdout], [], [], 1.0)
            if ready:
                line = self.process.stdout.readline()
                break
        match = re.search(r"on http://[^:]+:(\d+) ", line)
        if not match:
            self.process.kill()
            self.exit_code = self.process.wait()
            self.log.close()
            raise ServerDidNotStart("the server did not start: %r\n%s" %
                                    (line, pathlib.Path(log_path).read_text()),
                                    self.exit_code)
        self.port = int(match.group(1))
        self.base_url = "http://127.0.0.1:%d" % self.port

    def client(self, **options):
        return openai.OpenAI(base_url=self.base_url + "/v1", api_key="none",
                             max_retries=0, timeout=120, **options)

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError("the server did not stop on SIGTERM")
        self.log.close()
        assert code == 0, pathlib.Path(self.log_path).read_text()


def start_server(tmp_path_factory, folder, *options, pipeline=PIPELINE):
    """sits-serve-reference on MODEL with `options`."""
    log = tmp_path_factory.mktemp("server") / "stderr.txt"
    return ServerProcess(
        [tool("sits-serve-reference"), str(MODEL), "--tokenizer=" + str(folder),
         "--port=0", "--model-name=" + MODEL_NAME, *pipeline, *options], log)


@pytest.fixture(scope="session")
def server(tmp_path_factory, tokenizer_folder):
    """Four slots, a queue of 16, whole prompts in one step."""
    process = start_server(tmp_path_factory, tokenizer_folder,
                           "--max-batch=4", "--max-queue=16")
    yield process
    process.stop()


@pytest.fixture(scope="session")
def chunked_server(tmp_path_factory, tokenizer_folder):
    """Two slots; prompts fed 3 tokens per step; bodies of 4 KiB at most."""
    process = start_server(tmp_path_factory, tokenizer_folder,
                           "--max-batch=2", "--max-prefill-chunk=3",
                           "--max-body-bytes=4096")
    yield process
    process.stop()


@pytest.fixture(scope="session")
def reference(tokenizer_folder):
    """reference(text, n): sits-exec's greedy continuation of `text`
    (prompt ids, generated ids, text), as `sits-exec --prompt` prints it."""
    sits_exec = tool("sits-exec")
    cache = {}

    def run(text, max_new_tokens):
        key = (text, max_new_tokens)
        if key not in cache:
            result = subprocess.run(
                [sits_exec, str(MODEL), "--stage=optimized", "--prompt=" + text,
                 "--tokenizer=" + str(tokenizer_folder),
                 "--max-new-tokens=%d" % max_new_tokens, *PIPELINE],
                capture_output=True, text=True, timeout=300)
            assert result.returncode == 0, result.stderr
            ids = {}
            for line in result.stderr.splitlines():
                name, _, values = line.partition(": ")
                ids[name] = [int(v) for v in values.split()]
            assert result.stdout.endswith("\n")
            cache[key] = (ids["prompt ids"], ids["tokens[0]"],
                          result.stdout[:-1])
        return cache[key]

    return run


def http(base_url, method, path, body=None, raw=None):
    """(status, headers, parsed JSON or text) of one plain HTTP request."""
    data = raw if raw is not None else (
        None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(base_url + path, data=data, method=method,
                                     headers={"Content-Type":
                                              "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            status, headers, payload = (response.status, response.headers,
                                        response.read().decode())
    except urllib.error.HTTPError as error:
        status, headers, payload = error.code, error.headers, error.read(
        ).decode()
    try:
        return status, headers, json.loads(payload)
    except ValueError:
        return status, headers, payload


GREEDY = {"temperature": 0}


def complete(client, prompt, max_tokens, **options):
    """A completion, greedy unless `options` say otherwise."""
    return client.completions.create(model=MODEL_NAME, prompt=prompt,
                                     max_tokens=max_tokens,
                                     **{**GREEDY, **options})


def token_ids(choice):
    """The generated ids the server returns beside the text (an
    extension field)."""
    return list(choice.model_extra["token_ids"])


def completion_ids(client, prompts, max_tokens, at_once=False, **options):
    """The generated ids of a completion of each prompt (`complete`), one
    request at a time or all of them at once."""
    def one(prompt):
        return token_ids(complete(client, prompt, max_tokens,
                                  **options).choices[0])
    if not at_once:
        return [one(p) for p in prompts]
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
        return list(pool.map(one, prompts))


def metric_values(process):
    """The /metrics samples as {name{labels}: value}."""
    status, headers, text = http(process.base_url, "GET", "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain")
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values
