#!/usr/bin/env python3
"""PyTorch serving bench/serve_load.py's workload with static batches: the
baseline sits-serve is compared with in the same device call.

  torch_serve.py --shape llama3-8b --levels 1,8,32,64 --requests 256 \\
      --prompt-len 128,2048 --output-len 128,512 --max-seconds 20 --json F

The requests are serve_load.py's for the same seed and ranges (the same
prompt and output lengths). At each level c the requests run c at a time in
arrival order, as one static batch each: the prompts are left-padded to the
batch's longest and prefilled together in chunks of --prefill-chunk tokens
(eager), then the batch decodes with bench/llama_bench.py's gpt-fast style
decoder (static KV cache, torch.compile(mode="reduce-overhead") of the step)
until its longest request is done; a request counts the tokens up to its own
max_tokens. The pad tokens are attended to (no padding mask): this changes
the values of the random-weight model's tokens, not the work of a step.

A level stops after --max-seconds of serving (the compile and a warm-up step
before it are not counted), mid-batch if need be, with the tokens made so
far. Per level: output tokens/s, the time to a request's first token (its
batch's prefill; later batches' requests also wait for the batches before
them, which this does not count, as serve_load.py counts from the moment a
stream is free) and the gaps between decode steps (CUDA events).
"""

import argparse
import json
import statistics
import sys
import time
from types import SimpleNamespace

import llama_bench
import serve_load


def run_level(hf, theta, work, batch, max_len, prefill_chunk, seconds):
    import torch
    decoder = llama_bench.make_fast_decoder(hf, theta, batch, max_len)

    def decode_one(model, token, pos):
        return model(token, pos)[:, -1].argmax(-1)

    compiled = torch.compile(decode_one, mode="reduce-overhead",
                             fullgraph=True)
    token = torch.zeros((batch, 1), dtype=torch.long, device="cuda")
    start = time.time()
    with torch.no_grad():
        for pos in range(3):  # compile, capture, warm
            compiled(decoder, token, torch.tensor([pos], device="cuda"))
        torch.cuda.synchronize()
    compile_s = time.time() - start

    tokens, ttft, gaps = 0, [], []
    begin = time.perf_counter()
    deadline = begin + seconds
    for first in range(0, len(work), batch):
        if time.perf_counter() >= deadline:
            break
        group = work[first:first + batch]
        group += [group[-1]] * (batch - len(group))  # a short last batch
        longest = max(len(prompt) for prompt, _ in group)
        ids = torch.tensor([[0] * (longest - len(prompt)) + prompt
                            for prompt, _ in group], device="cuda")
        batch_start = time.perf_counter()
        with torch.no_grad():
            for lo in range(0, longest, prefill_chunk):
                hi = min(longest, lo + prefill_chunk)
                logits = decoder(ids[:, lo:hi],
                                 torch.arange(lo, hi, device="cuda"), True)
            token = logits[:, -1].argmax(-1, keepdim=True)
            torch.cuda.synchronize()
        prefilled = time.perf_counter()
        ttft += [prefilled - batch_start] * len(work[first:first + batch])
        tokens += len(work[first:first + batch])  # the first tokens
        outputs = [max_tokens for _, max_tokens in work[first:first + batch]]
        events = [torch.cuda.Event(enable_timing=True)]
        events[0].record()
        pos = longest
        with torch.no_grad():
            for step in range(1, max(outputs)):
                token = compiled(decoder, token,
                                 torch.tensor([pos], device="cuda"))
                token = token.view(batch, 1).clone()
                pos += 1
                events.append(torch.cuda.Event(enable_timing=True))
                events[-1].record()
                tokens += sum(1 for n in outputs if n > step)
                # Checked every 16 steps: a synchronization per step would
                # slow the steps it measures.
                if step % 16 == 0:
                    events[-1].synchronize()
                    if time.perf_counter() >= deadline:
                        break
        torch.cuda.synchronize()
        gaps += [a.elapsed_time(b) / 1e3 for a, b in zip(events, events[1:])]
    window = min(time.perf_counter(), deadline) - begin
    del decoder, compiled
    torch._dynamo.reset()
    torch.cuda.empty_cache()
    percent = serve_load.percentile
    return {
        "impl": "torch.compile static batches", "concurrency": batch,
        "compile_s": round(compile_s, 1), "window_s": round(window, 2),
        "output_tokens": tokens,
        "output_tokens_per_s": round(tokens / window, 1),
        "ttft_ms_p50": 1e3 * percent(ttft, 0.5),
        "ttft_ms_p99": 1e3 * percent(ttft, 0.99),
        "itl_ms_p50": 1e3 * percent(gaps, 0.5) if gaps else None,
        "itl_ms_p99": 1e3 * percent(gaps, 0.99) if gaps else None,
        "itl_ms_mean": 1e3 * statistics.fmean(gaps) if gaps else None,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(llama_bench.SHAPES),
                        required=True)
    parser.add_argument("--levels", default="1,8,32,64")
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--prompt-len", type=serve_load.parse_range,
                        default=(128, 2048))
    parser.add_argument("--output-len", type=serve_load.parse_range,
                        default=(128, 512))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prefill-chunk", type=int, default=512)
    parser.add_argument("--max-seconds", type=float, default=20.0)
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    levels = [int(c) for c in args.levels.split(",")]
    if not all(1 <= c <= 256 for c in levels) or args.prefill_chunk < 1:
        sys.exit("torch_serve: levels must be 1..256, --prefill-chunk >= 1")

    import torch
    hf, theta = llama_bench.make_model(args.shape)
    spec = SimpleNamespace(vocab=hf.config.vocab_size, shared_prefix=0,
                           requests=args.requests, prompt_len=args.prompt_len,
                           output_len=args.output_len)
    # serve_load.py draws the same requests from a generator of this seed.
    import random
    work = serve_load.make_work(random.Random(args.seed), spec)
    max_len = args.prompt_len[1] + args.output_len[1]
    result = {"device": torch.cuda.get_device_name(),
              "torch": torch.__version__, "shape": args.shape,
              "prompt_len": list(args.prompt_len),
              "output_len": list(args.output_len), "levels": []}
    for batch in levels:
        try:
            row = run_level(hf, theta, work, batch, max_len,
                            args.prefill_chunk, args.max_seconds)
        except Exception as error:  # recorded, the other levels still run
            row = {"concurrency": batch, "error": repr(error)}
            torch._dynamo.reset()
            torch.cuda.empty_cache()
        result["levels"].append(row)
        print(json.dumps(row), flush=True)
        with open(args.json, "w") as out:
            json.dump(result, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
