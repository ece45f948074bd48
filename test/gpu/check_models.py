#!/usr/bin/env python3
"""Checks compiled engines of the shared test models against their references.

For every model folder (model.onnx, test_data_set_0/{input,output}_0.pb,
greedy.json) and every weight type it compiles an engine with sitsc, then with
a runner (sits-score on a GPU, or sits-emulate on the CPU; both take the same
arguments) it checks:

  logits    teacher-forced logits at every position (prefill 1 token then
            decode, prefill half then decode, prefill all in two chunks)
            against output_0.pb: max abs error < 1e-3 (fp32), 2e-2 (fp16),
            1.6e-1 (bf16)
  greedy    the 48 tokens of greedy.json from its prompt (required for fp32,
            and for fp16 where --fp16-greedy names the model)
  batch     the same prompt batched with a shorter one (right-padded prefill,
            a padded decode bucket) gives the same tokens
  graph     (GPU) CUDA-graph and direct launches give identical tokens, greedy
            and sampled
  seeded    (GPU) sampling with a seed twice gives identical tokens
  tvc       (--tvc) an engine with the TVC LM head (sitsc --tvc=exact, options
            --tvc-options, rank TVC_RANK) gives the plain engine's greedy
            tokens, alone and batched, and (GPU) the same tokens sampled with
            top-k 4 and with and without CUDA graphs, and (GPU) sampling
            without top-k refused; the runner's counters of proved and
            fallback rows are printed (--tvc-require-both: both must occur)

With --weights int8,int4 it also compiles engines with quantized weights
(sitsc --weights; fp16 activations) and checks them against the CPU reference
executor of the same quantized program (sitsc --emit=optimized, run by
sits-exec): logits at every position (< 2e-2, as fp16), and the greedy stream
token by token (each generated token is the reference's argmax, or within
2e-2 of it: a near tie), alone and batched.

It prints a summary table and exits non-zero if any check fails.

  check_models.py --sitsc sitsc --runner sits-score --work DIR MODEL_DIR...
  check_models.py --sitsc sitsc --runner sits-emulate --emulate --work DIR ...
  check_models.py ... --weights fp16,int8,int4 --exec sits-exec
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper

# bf16 keeps 8 significant bits to fp16's 11: its weight rounding errors,
# and so the logit errors they cause, are 8x larger (measured on the H200:
# 4.4e-3..6.0e-3 bf16 against 5.5e-4..7.0e-4 fp16, llama_bytes 4.7e-2
# against 6.7e-3), so its bound is 8x the fp16 one.
TOLERANCE = {"fp32": 1e-3, "fp16": 2e-2, "bf16": 1.6e-1}
# Small engines: the tests use at most 12 + 48 tokens and 2 sequences. A
# prefill chunk of 8 tokens makes the 12-token prompts prefill in two chunks.
ENGINE_OPTIONS = ["--max-seq-len=128", "--max-batch=4",
                  "--max-prefill-tokens=8", "--batch-buckets=1,2,4"]


# The TVC head's rank per model (the committed test models: 112 of 128;
# llama_bytes: 64 of 256; llama_bpe16k: 192 of 256); with 32 candidates and top-k 4 both proved and
# fallback rows occur on the CPU reference (sitsc --verify-greedy).
TVC_RANK = {"llama_bytes": 64, "llama_bpe16k": 192}
TVC_DEFAULT_RANK = 112
TVC_TOP_K = 4


class Failure(Exception):
    pass


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise Failure("`%s` failed (exit %d): %s" % (
            " ".join(os.path.basename(c) if i == 0 else c
                     for i, c in enumerate(command)),
            result.returncode, (result.stderr or result.stdout).strip()[-2000:]))
    return result.stdout


def tokens_arg(rows):
    return ";".join(",".join(str(int(t)) for t in row) for row in rows)


def parse_tvc(output):
    """The runner's `tvc: P proved, F fallback rows` line, as (P, F)."""
    for line in output.splitlines():
        if line.startswith("tvc: "):
            words = line.split()
            return int(words[1]), int(words[3])
    raise Failure("the runner printed no TVC counters:\n" + output[-1000:])


def parse_tokens(output, count):
    rows = {}
    for line in output.splitlines():
        if line.startswith("tokens["):
            index = int(line[len("tokens["):line.index("]")])
            rows[index] = [int(t) for t in line.split(":", 1)[1].split()]
    if sorted(rows) != list(range(count)):
        raise Failure("the runner printed no tokens for every sequence:\n" +
                      output[-1000:])
    return [rows[i] for i in range(count)]


class Model:
    def __init__(self, folder):
        self.folder = folder
        self.name = os.path.basename(os.path.normpath(folder))
        data = os.path.join(folder, "test_data_set_0")
        self.inputs = numpy_helper.to_array(
            onnx.load_tensor(os.path.join(data, "input_0.pb")))
        # Models made without PyTorch (enlarge_llama.py --test-data) have
        # no reference logits: they are checked with quantized weights
        # only, against the CPU reference executor.
        outputs = os.path.join(data, "output_0.pb")
        self.outputs = numpy_helper.to_array(onnx.load_tensor(outputs)) \
            if os.path.exists(outputs) else None
        with open(os.path.join(folder, "greedy.json")) as f:
            greedy = json.load(f)
        self.prompt = greedy["prompt"]
        self.greedy = greedy["greedy"]


class Checker:
    def __init__(self, args):
        self.args = args
        self.rows = []
        self.failed = False
        self.tvc_counts = [0, 0]

    def engine_paths(self, model, dtype, variant=""):
        # `dtype` is the engine's weight type, or "fp16+int4" and the like
        # for quantized linear layers (fp16 everywhere else); `variant`
        # "-tvc" for the engine with the TVC LM head.
        base = os.path.join(self.args.work, "%s-%s%s" % (
            model.name, dtype.replace("+", "-"), variant))
        return base + ".sits", base + ".cu"

    def tvc_options(self, model):
        rank = TVC_RANK.get(model.name, TVC_DEFAULT_RANK)
        return self.args.tvc_options.split() + ["--tvc-rank=%d" % rank]

    def tvc(self, dtype):
        """Whether `dtype` also gets a TVC engine (the GPU TVC head reads
        unquantized weights only)."""
        return self.args.tvc and "+" not in dtype

    def sitsc_command(self, model, dtype):
        command = [self.args.sitsc, os.path.join(model.folder, "model.onnx"),
                   "--dtype=" + dtype.split("+")[0]] + ENGINE_OPTIONS
        if "+" in dtype:
            command.append("--weights=" + dtype.split("+")[1])
        return command + self.args.sitsc_arg

    def compile(self, model, dtype):
        variants = [("", [])]
        if self.tvc(dtype):
            variants.append(("-tvc", self.tvc_options(model)))
        for variant, options in variants:
            engine, cuda = self.engine_paths(model, dtype, variant)
            command = self.sitsc_command(model, dtype) + [
                "--target=" + self.args.target] + options
            run(command + ["-o", engine, "--force"])
            if self.args.emulate:
                with open(cuda, "w") as out:
                    out.write(run(command + ["--emit=cuda"]))
        engine, _ = self.engine_paths(model, dtype)
        if "+" in dtype:
            # The quantized program, weights included, for the reference.
            program = engine[:-len(".sits")] + ".mlir"
            run(self.sitsc_command(model, dtype) + [
                "--emit=optimized", "--print-weights", "-o", program])

    def reference(self, model, dtype, ids):
        """Logits [B, S, V] of the quantized program on the CPU reference
        executor: its prefill step over `ids` from an empty cache."""
        engine, _ = self.engine_paths(model, dtype)
        base = engine[:-len(".sits")]
        folder = base + "-reference-%d" % abs(hash(str(ids.tolist())))
        os.makedirs(folder, exist_ok=True)
        np.save(os.path.join(folder, "ids.npy"), ids.astype(np.int64))
        run([self.args.exec, base + ".mlir", "--function", "prefill",
             "--input", os.path.join(folder, "ids.npy"), "--output-dir",
             folder])
        return np.load(os.path.join(folder, "result_0.npy"))

    def runner(self, model, dtype, mode, *extra, variant=""):
        engine, cuda = self.engine_paths(model, dtype, variant)
        command = [self.args.runner, engine]
        if self.args.emulate:
            command += ["--cuda", cuda, "--poison"]
        return run(command + [mode] + list(extra))

    def score(self, model, dtype, prefill):
        out = os.path.join(self.args.work, "%s-%s-p%d.npy" % (
            model.name, dtype, prefill))
        self.runner(model, dtype, "score", "--tokens",
                    tokens_arg(model.inputs), "--prefill", str(prefill),
                    "--out", out)
        return np.load(out)

    def generate(self, model, dtype, prompts, count, *extra, variant="",
                 counters=None):
        output = self.runner(model, dtype, "generate", "--tokens",
                             tokens_arg(prompts), "--max-new-tokens",
                             str(count), *extra, variant=variant)
        if counters is not None:
            proved, fallback = parse_tvc(output)
            counters[0] += proved
            counters[1] += fallback
        return parse_tokens(output, len(prompts))

    def check_tvc(self, model, dtype, row, problems, single, short, batched):
        """The TVC engine against the plain one (greedy; sampled on a GPU)."""
        count = self.args.greedy_tokens
        counters = [0, 0]
        tvc = lambda prompts, *extra: self.generate(
            model, dtype, prompts, count, *extra, variant="-tvc",
            counters=counters)
        same = tvc([model.prompt]) == [single]
        same &= tvc([model.prompt, short]) == batched
        if not same:
            problems.append("the TVC engine's greedy tokens differ from the "
                            "plain engine's")
        if not self.args.emulate:
            sampled = ["--temperature", "0.8", "--top-k", str(TVC_TOP_K),
                       "--seed", "77"]
            plain = self.generate(model, dtype, [model.prompt, short], count,
                                  *sampled)
            if tvc([model.prompt, short], *sampled) != plain:
                same = False
                problems.append("the TVC engine's tokens sampled with top-k "
                                "%d differ from the plain engine's" % TVC_TOP_K)
            if tvc([model.prompt, short], "--no-cuda-graph") != batched:
                same = False
                problems.append("the TVC engine's tokens differ without CUDA "
                                "graphs")
            # Sampling without top-k needs every logit: refused, clearly.
            engine, _ = self.engine_paths(model, dtype, "-tvc")
            refused = subprocess.run(
                [self.args.runner, engine, "generate", "--tokens",
                 tokens_arg([model.prompt]), "--max-new-tokens", "2",
                 "--temperature", "0.8"], capture_output=True, text=True)
            if refused.returncode == 0 or "TVC head" not in refused.stderr:
                problems.append("sampling without top-k on the TVC engine "
                                "was not refused: exit %d, %s" % (
                                    refused.returncode,
                                    refused.stderr.strip()[-300:]))
        rows = counters[0] + counters[1]
        row["tvc"] = "%s %d/%d fb %.0f%%" % (
            "same" if same else "DIFFERS", counters[0], counters[1],
            100.0 * counters[1] / rows if rows else 0)
        self.tvc_counts[0] += counters[0]
        self.tvc_counts[1] += counters[1]

    def greedy_against_reference(self, model, dtype, prompt, tokens):
        """The index of the first generated token that is neither the
        reference's argmax nor within the tolerance of it (len: none), and
        the number of exact argmax agreements."""
        logits = self.reference(model, dtype, np.array([prompt + tokens]))[0]
        exact = 0
        for i, token in enumerate(tokens):
            row = logits[len(prompt) - 1 + i]
            best = int(np.argmax(row))
            exact += best == token
            if best != token and not row[best] - row[token] < TOLERANCE["fp16"]:
                return i, exact
        return len(tokens), exact

    def check(self, model, dtype):
        row = {"model": model.name, "dtype": dtype}
        problems = []
        quantized = "+" in dtype
        tolerance = self.args.logits_tolerance or \
            TOLERANCE[dtype.split("+")[0]]
        outputs = model.outputs
        if quantized:
            outputs = self.reference(model, dtype, model.inputs)
        elif outputs is None:
            raise Failure("%s has no reference logits (test_data_set_0/"
                          "output_0.pb): check it with --weights int8,int4 "
                          "only" % model.name)
        # Logits: every position, through three prefill/decode splits.
        length = model.inputs.shape[1]
        worst = 0.0
        splits = [] if self.args.skip_logits else [1, length // 2, length]
        for prefill in sorted(set(splits)):
            got = self.score(model, dtype, prefill)
            want = outputs[:, prefill - 1:, :]
            if got.shape != want.shape:
                raise Failure("logits of shape %s, expected %s" % (
                    got.shape, want.shape))
            errors = np.abs(got.astype(np.float64) - want).max(axis=(0, 2))
            if not np.all(np.isfinite(errors)):
                problems.append("non-finite logits (prefill %d)" % prefill)
            worst = max(worst, float(np.nanmax(errors)))
            for position, error in enumerate(errors):
                if not error < tolerance:
                    problems.append("position %d (prefill %d): error %.3g" % (
                        prefill - 1 + position, prefill, error))
                    break
        row["logits"] = "%.2e" % worst if splits else "-"

        # Greedy: the reference stream, alone and batched with a shorter
        # prompt (padding in prefill and in the decode bucket).
        count = self.args.greedy_tokens
        want = model.greedy[:count]
        single = self.generate(model, dtype, [model.prompt], count)[0]
        if quantized:
            # The quantized program's own stream: every token the
            # reference's argmax (or a near tie), given the ones before.
            agreed, exact = self.greedy_against_reference(
                model, dtype, list(model.prompt), single)
            row["greedy"] = "%d/%d" % (exact, len(single))
            if agreed < len(single):
                problems.append("greedy token %d is %d, not the quantized "
                                "reference's choice" % (agreed, single[agreed]))
        else:
            matched = next((i for i, (a, b) in enumerate(zip(single, want))
                            if a != b), len(want))
            row["greedy"] = "%d/%d" % (matched, len(want))
            required = dtype == "fp32" or model.name in self.args.fp16_greedy
            if matched < len(want) and required:
                problems.append("greedy token %d is %d, expected %d" % (
                    matched, single[matched], want[matched]))
        short = list(model.inputs[1][:5])
        batched = self.generate(model, dtype, [model.prompt, short], count)
        alone = self.generate(model, dtype, [short], count)[0]
        row["batch"] = "ok" if batched == [single, alone] else "DIFFERS"
        if batched != [single, alone]:
            problems.append("a batch of two prompts gives other tokens than "
                            "each prompt alone")
        if self.tvc(dtype):
            self.check_tvc(model, dtype, row, problems, single, short, batched)

        if not self.args.emulate:
            direct = self.generate(model, dtype, [model.prompt, short], count,
                                   "--no-cuda-graph")
            sampled = ["--temperature", "0.8", "--top-k", "40", "--top-p",
                       "0.95", "--seed", "1234"]
            first = self.generate(model, dtype, [model.prompt, short], count,
                                  *sampled)
            again = self.generate(model, dtype, [model.prompt, short], count,
                                  *sampled)
            first_direct = self.generate(model, dtype, [model.prompt, short],
                                         count, *sampled, "--no-cuda-graph")
            row["graph"] = "ok" if direct == batched and \
                first_direct == first else "DIFFERS"
            if direct != batched:
                problems.append("greedy tokens differ with and without CUDA "
                                "graphs")
            if first_direct != first:
                problems.append("sampled tokens differ with and without CUDA "
                                "graphs")
            row["seeded"] = "ok" if first == again else "DIFFERS"
            if first != again:
                problems.append("seeded sampling is not reproducible")
        row["problems"] = problems
        return row

    def run_all(self, models):
        os.makedirs(self.args.work, exist_ok=True)
        jobs = [(m, d) for m in models for d in self.args.dtypes]
        started = time.time()
        compiled = {}
        with concurrent.futures.ThreadPoolExecutor(self.args.jobs) as pool:
            futures = {pool.submit(self.compile, m, d): (m, d) for m, d in jobs}
            for future in concurrent.futures.as_completed(futures):
                try:
                    future.result()
                    compiled[futures[future]] = None
                except Failure as error:
                    compiled[futures[future]] = str(error)
        print("compiled %d engines in %.1f s" % (len(jobs),
                                                  time.time() - started))
        for model, dtype in jobs:
            started = time.time()
            if compiled[(model, dtype)]:
                row = {"model": model.name, "dtype": dtype,
                       "problems": ["compile: " + compiled[(model, dtype)]]}
            else:
                try:
                    row = self.check(model, dtype)
                except Failure as error:
                    row = {"model": model.name, "dtype": dtype,
                           "problems": [str(error)]}
            row["seconds"] = "%.1f" % (time.time() - started)
            self.rows.append(row)
            self.failed |= bool(row["problems"])
            status = "FAIL" if row["problems"] else "ok"
            print("%-20s %-5s %s" % (model.name, dtype, status), flush=True)

    def summary(self):
        columns = ["model", "dtype", "logits", "greedy", "batch"]
        if not self.args.emulate:
            columns += ["graph", "seeded"]
        if self.args.tvc:
            columns += ["tvc"]
        columns += ["seconds", "status"]
        table = []
        for row in self.rows:
            row["status"] = "FAIL" if row["problems"] else "pass"
            table.append([str(row.get(c, "-")) for c in columns])
        widths = [max(len(c), *(len(r[i]) for r in table))
                  for i, c in enumerate(columns)]
        line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths))
        print()
        print(line(columns))
        print(line(["-" * w for w in widths]))
        for cells in table:
            print(line(cells))
        for row in self.rows:
            for problem in row["problems"]:
                print("FAIL %s %s: %s" % (row["model"], row["dtype"], problem))
        if self.args.tvc:
            proved, fallback = self.tvc_counts
            rows = proved + fallback
            print("\ntvc: %d rows, %d proved, %d fell back to the full head "
                  "(fallback rate %.2f%%)" % (
                      rows, proved, fallback,
                      100.0 * fallback / rows if rows else 0))
            if self.args.tvc_require_both and (not proved or not fallback):
                print("FAIL tvc: expected both proved and fallback rows")
                self.failed = True
        passed = sum(1 for r in self.rows if not r["problems"])
        print("\n%d of %d model/dtype runs passed" % (passed, len(self.rows)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="+", help="model folders")
    parser.add_argument("--sitsc", required=True)
    parser.add_argument("--runner", required=True,
                        help="sits-score (GPU) or sits-emulate (--emulate)")
    parser.add_argument("--emulate", action="store_true",
                        help="the runner is sits-emulate (CPU): no graph or "
                             "sampling checks")
    parser.add_argument("--work", required=True, help="folder for engines")
    parser.add_argument("--dtypes", default="fp32,fp16")
    parser.add_argument("--target", default="sm_90a",
                        help="GPU architecture to compile for")
    parser.add_argument("--fp16-greedy", default="llama_bytes",
                        help="models whose fp16 engine must reproduce the "
                             "greedy stream too (comma-separated)")
    parser.add_argument("--greedy-tokens", type=int, default=48)
    parser.add_argument("--tvc", action="store_true",
                        help="also check an engine with the TVC LM head "
                             "against the plain engine")
    parser.add_argument("--tvc-options",
                        default="--tvc=exact --tvc-candidates=32 "
                                "--tvc-top-k=%d" % TVC_TOP_K,
                        help="sitsc options of the TVC engines (the rank "
                             "comes from TVC_RANK)")
    parser.add_argument("--tvc-require-both", action="store_true",
                        help="fail unless both proved and fallback rows "
                             "occurred")
    parser.add_argument("--logits-tolerance", type=float,
                        help="the logits' bound for every engine of this "
                             "call instead of the dtype's (a reference "
                             "computed in f16, as onnxruntime's of an fp16 "
                             "export)")
    parser.add_argument("--skip-logits", action="store_true",
                        help="skip the teacher-forced logits (other tests "
                             "cover them)")
    parser.add_argument("--sitsc-arg", action="append", default=[],
                        help="another sitsc option for every engine (e.g. "
                        "--sitsc-arg=--gemv-quant-tiles=4)")
    parser.add_argument("--weights", default="fp16",
                        help="weight schemes: fp16 (the --dtypes engines), "
                             "int8, int4 (fp16 engines with quantized linear "
                             "layers, checked against the CPU reference of "
                             "the quantized program; needs --exec)")
    parser.add_argument("--exec", default="sits-exec",
                        help="the CPU reference executor (sits-exec)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2,
                        help="engines compiled at once")
    args = parser.parse_args()
    args.dtypes = args.dtypes.split(",")
    args.fp16_greedy = set(args.fp16_greedy.split(","))
    for dtype in args.dtypes:
        if dtype not in TOLERANCE:
            parser.error("unknown dtype " + dtype)
    weights = args.weights.split(",")
    for scheme in weights:
        if scheme not in ("fp16", "int8", "int4"):
            parser.error("unknown weight scheme " + scheme)
    if "fp16" not in weights:
        args.dtypes = []
    args.dtypes += ["fp16+" + w for w in weights if w != "fp16"]
    models = []
    for folder in args.models:
        if not os.path.isfile(os.path.join(folder, "model.onnx")):
            parser.error("%s holds no model.onnx" % folder)
        models.append(Model(folder))
    checker = Checker(args)
    checker.run_all(models)
    checker.summary()
    return 1 if checker.failed else 0


if __name__ == "__main__":
    sys.exit(main())
