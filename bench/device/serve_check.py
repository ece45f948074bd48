"""sits-serve on the GPU, with nothing but the standard library (the GPU
machines have no openai package): starts the server on a free port, sends
greedy completions (alone, all at once several times over, and streamed)
and compares every response's token ids and text with `sits-run --prompt
--print-ids` on the same engine; a chat completion must come back; SIGTERM
must stop the server with exit code 0. Prints PASSED or FAILED.

usage: serve_check.py SITS_SERVE SITS_RUN ENGINE
"""

import concurrent.futures
import json
import re
import signal
import subprocess
import sys
import urllib.request

PROMPTS = ["The quick brown fox", "Ça va? 日本語 😀", "def main():",
           "1, 2, 3,", "A long prompt that keeps going for a while, so that "
           "it spans chunks"]
TOKENS = 16


def post(port, path, body):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read().decode("utf-8")


def reference(sits_run, engine, prompt):
    run = subprocess.run([sits_run, engine, "--prompt", prompt,
                          "--max-new-tokens", str(TOKENS), "--print-ids"],
                         capture_output=True)
    err = run.stderr.decode()
    ids = re.search(r"^tokens\[0\]: ?(.*)$", err, re.M).group(1).split()
    return [int(i) for i in ids], run.stdout.decode("utf-8").rstrip("\n")


def main():
    sits_serve, sits_run, engine = sys.argv[1:4]
    server = subprocess.Popen([sits_serve, engine, "--port=0",
                               "--model-name=gqa"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    print(line.strip())
    port = int(re.search(r":(\d+) \(", line).group(1))
    want = {p: reference(sits_run, engine, p) for p in PROMPTS}
    failures = 0

    def check(prompt, label):
        nonlocal failures
        body = json.loads(post(port, "/v1/completions", {
            "model": "gqa", "prompt": prompt, "max_tokens": TOKENS,
            "temperature": 0}))
        choice = body["choices"][0]
        ids, text = want[prompt]
        ok = choice["token_ids"] == ids and choice["text"] == text
        failures += not ok
        if not ok:
            print(f"{label}: {prompt!r}: got {choice['token_ids']} "
                  f"{choice['text']!r}, sits-run {ids} {text!r}")

    for prompt in PROMPTS:
        check(prompt, "alone")
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        list(pool.map(lambda p: check(p, "together"), PROMPTS * 3))
    streamed = post(port, "/v1/completions", {
        "model": "gqa", "prompt": PROMPTS[0], "max_tokens": TOKENS,
        "temperature": 0, "stream": True})
    pieces = [json.loads(l[6:])["choices"][0]["text"]
              for l in streamed.splitlines()
              if l.startswith("data: {")]
    if "".join(pieces) != want[PROMPTS[0]][1]:
        failures += 1
        print(f"streamed: {''.join(pieces)!r}")
    chat = json.loads(post(port, "/v1/chat/completions", {
        "model": "gqa", "messages": [{"role": "user", "content": "Hello!"}],
        "max_tokens": 8, "temperature": 0}))
    print("chat:", repr(chat["choices"][0]["message"]["content"]),
          chat["choices"][0]["finish_reason"], chat["usage"])
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                     timeout=10).read().decode()
    print("\n".join(l for l in metrics.splitlines()
                    if l.startswith(("sits_requests", "sits_generated",
                                     "sits_batch_size_sum",
                                     "sits_batch_size_count"))))
    server.send_signal(signal.SIGTERM)
    code = server.wait(timeout=30)
    if code != 0:
        failures += 1
        print("exit code after SIGTERM:", code, server.stderr.read()[-2000:])
    print(f"{len(PROMPTS) * 4 + 1} completions compared with sits-run")
    print("PASSED" if failures == 0 else f"FAILED ({failures})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
