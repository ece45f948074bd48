"""bench/serve_load.py, the serving benchmarks' load generator: against
sits-serve-reference every request is sent and read; and when --max-seconds
ends a run, the streams in flight are cut, the arrivals still waiting for a
stream are not sent, and tokens/s is over the run's time up to its end
(checked against a loopback listener that never answers, so that the run
outlasts its end whatever the machine's speed). bench/step_kinds.py sums
a run's steps by kind from the server's metrics."""

import json
import pathlib
import socket
import subprocess
import sys

from conftest import MODEL_NAME, http

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
LOAD = BENCH / "serve_load.py"


def run_load(url, tmp_path, *options):
    out = tmp_path / "load.json"
    result = subprocess.run(
        [sys.executable, str(LOAD), "--url", url, "--model", MODEL_NAME,
         "--vocab", "64", "--prompt-len", "4,4", "--json", str(out),
         *options], capture_output=True, text=True, timeout=120)
    return result, json.loads(out.read_text())


def test_every_request_is_read_within_the_run(server, tmp_path):
    result, summary = run_load(server.base_url, tmp_path, "--requests", "5",
                               "--concurrency", "2", "--output-len", "8,8")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (summary["submitted"], summary["ok"], summary["unsent"]) == \
        (5, 5, 0), summary
    assert summary["output_tokens"] == 40, summary
    assert summary["window_s"] == summary["wall_s"], summary
    assert summary["output_tokens_per_s"] == 40 / summary["wall_s"]


def test_step_kinds_of_a_run(server, tmp_path):
    before = tmp_path / "before.txt"
    before.write_text(http(server.base_url, "GET", "/metrics")[2])
    result, summary = run_load(server.base_url, tmp_path, "--requests", "3",
                               "--concurrency", "1", "--output-len", "5,5")
    assert result.returncode == 0, result.stdout + result.stderr
    after = tmp_path / "after.txt"
    after.write_text(http(server.base_url, "GET", "/metrics")[2])
    kinds = subprocess.run(
        [sys.executable, str(BENCH / "step_kinds.py"), str(after),
         str(before)], capture_output=True, text=True, timeout=60)
    assert kinds.returncode == 0, kinds.stderr
    # One at a time: a prompt of 4 tokens, its first token, then four
    # decode steps of one row each.
    assert kinds.stdout.startswith("  steps: decode 12 x "), kinds.stdout
    assert ", prompt 0, sampled 12; prefill 3 x " in kinds.stdout
    assert kinds.stdout.rstrip().endswith(", prompt 12, sampled 3"), \
        kinds.stdout


def test_the_runs_end_cuts_streams_and_sends_nothing_more(tmp_path):
    with socket.socket() as listener:  # accepts, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = "http://127.0.0.1:%d" % listener.getsockname()[1]
        result, summary = run_load(url, tmp_path, "--requests", "5",
                                   "--concurrency", "1", "--output-len",
                                   "8,8", "--max-seconds", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    # The first request waited past the end (cut); the four arrivals
    # behind it were never sent.
    assert (summary["submitted"], summary["cut"], summary["unsent"]) == \
        (1, 1, 4), summary
    assert summary["failed"] == 0 and summary["output_tokens"] == 0, summary
    assert summary["window_s"] == 1 < summary["wall_s"], summary
    assert "(unsent 4)" in result.stdout
