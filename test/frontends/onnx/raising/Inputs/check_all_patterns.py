#!/usr/bin/env python3
"""Runs check_raised.py on every pattern model of onnx_pattern_models.py
and on the committed test models; exits 1 if any output differs."""

import concurrent.futures
import os
import subprocess
import sys

# Models onnxruntime cannot run: the mask does not broadcast at run time,
# and a past_key with the query's head count.
SKIP = {"attention-bad-mask", "attention23-past"}
# onnxruntime wants RotaryEmbedding caches with the input's batch size
# (these graphs broadcast a batch-1 cache, as ONNX allows).
BATCH_ONE = {"rotary23", "rotary23-3d", "rotary23-interleaved",
             "llama_opset23"}


def main():
    cases_file, testtools, tools, workdir = sys.argv[1:5]
    with open(cases_file) as f:
        cases = [line.strip() for line in f if line.strip()]
    models = os.path.join(os.path.dirname(testtools), "models")
    jobs = []
    for case in cases:
        if case in SKIP:
            continue
        path = os.path.join(workdir, case + ".onnx")
        subprocess.run([sys.executable,
                        os.path.join(testtools, "onnx_pattern_models.py"),
                        case, path], check=True)
        jobs.append((case, path, ["--batch", "1"] if case in BATCH_ONE else []))
    for name in sorted(os.listdir(models)):
        path = os.path.join(models, name, "model.onnx")
        if os.path.exists(path):
            jobs.append((name, path,
                         ["--batch", "1"] if name in BATCH_ONE else []))
    def check(job):
        name, path, extra = job
        return name, subprocess.run(
            [sys.executable, os.path.join(testtools, "check_raised.py"), path,
             "--tools", tools, "--workdir", os.path.join(workdir, name)] +
            extra, capture_output=True, text=True)

    failed = []
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        for name, result in pool.map(check, jobs):
            print("%s: %s" % (name, result.stdout.strip().replace("\n", "; ")))
            if result.returncode != 0:
                print(result.stderr)
                failed.append(name)
    if failed:
        print("MISMATCH: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
