#!/usr/bin/env python3
"""A bounded load generator for sits-serve (or any OpenAI-compatible server
on this machine): streamed /v1/completions of random token-id prompts,
arriving at a Poisson rate or all at once, at most --concurrency in flight.

Per request it records the time to the first token (TTFT) and the gaps
between tokens (ITL, a chunk's gap shared by its tokens); it prints and
writes (--json) output tokens/s, TTFT and ITL percentiles, and the requests
refused (429) or failed. Bounded on purpose: loopback servers only, at most
10000 requests, and --max-seconds ends the run: streams then in flight are
counted as cut, with the tokens they received by then, and requests that
arrived but waited for a free stream are not sent (unsent). Tokens/s is
over the run's time up to that end.

  bench/serve_load.py --url http://127.0.0.1:8000 --model m --requests 64 \\
      --concurrency 8 --prompt-len 128,512 --output-len 64,128 --vocab 512
"""

import argparse
import concurrent.futures
import json
import random
import socket
import statistics
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request


def percentile(values, fraction):
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(fraction * (len(ordered) - 1)))))
    return ordered[index]


def parse_range(text):
    low, _, high = text.partition(",")
    low, high = int(low), int(high or low)
    if not 1 <= low <= high:
        raise argparse.ArgumentTypeError("expected MIN,MAX with 1 <= MIN <= MAX")
    return low, high


def make_work(rng, args):
    """The requests, (prompt token ids, max_tokens) each, drawn from `rng`
    (bench/torch_serve.py draws the same ones from the same seed)."""
    prefix = [rng.randrange(16, args.vocab) for _ in range(args.shared_prefix)]
    work = []
    for _ in range(args.requests):
        length = rng.randint(*args.prompt_len)
        work.append((prefix + [rng.randrange(16, args.vocab)
                               for _ in range(length)],
                     rng.randint(*args.output_len)))
    return work


def check_loopback(url):
    host = urllib.parse.urlparse(url).hostname or ""
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except socket.gaierror as error:
        sys.exit("serve_load: cannot resolve %s: %s" % (host, error))
    if not all(a.startswith("127.") or a == "::1" for a in addresses):
        sys.exit("serve_load: %s is not a loopback address; this generator "
                 "only loads servers on this machine" % host)


def run_request(args, prompt, max_tokens, deadline):
    """One streamed completion: (status, ttft, gaps, tokens[, why failed])."""
    # An arrival that waited for a stream past the run's end: sending it
    # would load the server with a request nobody reads.
    if time.monotonic() >= deadline:
        return "unsent", None, [], 0
    body = json.dumps({
        "model": args.model, "prompt": prompt, "max_tokens": max_tokens,
        "temperature": 0, "ignore_eos": True, "stream": True,
    }).encode()
    request = urllib.request.Request(
        args.url + "/v1/completions", data=body,
        headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    # Past the run's end a stream is cut (below), so the socket may wait
    # until then, and a little more.
    timeout = max(1.0, deadline - time.monotonic()) + 1.0
    first, last, gaps, tokens = None, None, [], 0
    finish_error = None  # an error event in the stream
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            for raw in response:
                line = raw.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if "error" in chunk:
                    finish_error = json.dumps(chunk["error"])[:300]
                    continue
                choices = chunk.get("choices") or []
                count = sum(len(c.get("token_ids") or []) or
                            (1 if c.get("text") else 0) for c in choices)
                if count == 0:
                    continue
                now = time.perf_counter()
                if first is None:
                    first = now - start
                else:
                    gaps += [(now - last) / count] * count
                last = now
                tokens += count
                if time.monotonic() > deadline:
                    return "cut", first, gaps, tokens
    except urllib.error.HTTPError as error:
        if error.code == 429:
            return "refused", None, [], 0
        return ("failed", None, [], 0,
                "HTTP %d: %s" % (error.code, error.read()[:300].decode(
                    errors="replace")))
    except (urllib.error.URLError, OSError, ValueError) as error:
        if time.monotonic() >= deadline:  # the run's end, not the server
            return "cut", first, gaps, tokens
        return "failed", first, gaps, tokens, repr(error)[:300]
    if finish_error:
        return "failed", first, gaps, tokens, finish_error
    return "ok", first, gaps, tokens


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--model", required=True)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rate", type=float, default=0.0,
                        help="Poisson arrivals per second (0: as fast as the "
                             "concurrency allows)")
    parser.add_argument("--prompt-len", type=parse_range, default=(128, 512))
    parser.add_argument("--output-len", type=parse_range, default=(64, 128))
    parser.add_argument("--shared-prefix", type=int, default=0,
                        help="tokens every prompt starts with (the same ones)")
    parser.add_argument("--vocab", type=int, required=True,
                        help="token ids are drawn from [16, VOCAB)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-seconds", type=float, default=300.0)
    parser.add_argument("--json")
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    if not 1 <= args.requests <= 10000 or not 1 <= args.concurrency <= 256:
        sys.exit("serve_load: --requests must be 1..10000, --concurrency 1..256")
    if args.vocab <= 16:
        sys.exit("serve_load: --vocab must be above 16")
    check_loopback(args.url)

    rng = random.Random(args.seed)
    work = make_work(rng, args)
    deadline = time.monotonic() + args.max_seconds
    results = []
    lock = threading.Lock()
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
        futures = []
        next_arrival = time.perf_counter()
        for prompt, max_tokens in work:
            if args.rate > 0:
                next_arrival += rng.expovariate(args.rate)
                time.sleep(max(0.0, next_arrival - time.perf_counter()))
            if time.monotonic() > deadline:
                break
            futures.append(pool.submit(run_request, args, prompt, max_tokens,
                                       deadline))
        for future in futures:
            result = future.result()
            with lock:
                results.append(result)
    wall = time.perf_counter() - start
    # The streams stop reading at the run's end; the wait for them to
    # notice is not serving time.
    window = min(wall, args.max_seconds)
    results = [r for r in results if r[0] != "unsent"]

    ok = [r for r in results if r[0] == "ok"]
    # Streams cut by --max-seconds count with what they received.
    streamed = ok + [r for r in results if r[0] == "cut"]
    ttft = [r[1] for r in streamed if r[1] is not None]
    gaps = [g for r in streamed for g in r[2]]
    tokens = sum(r[3] for r in streamed)
    summary = {
        "label": args.label, "requests": len(work), "concurrency": args.concurrency,
        "rate": args.rate, "prompt_len": list(args.prompt_len),
        "output_len": list(args.output_len), "shared_prefix": args.shared_prefix,
        "submitted": len(results), "unsent": len(futures) - len(results),
        "ok": len(ok),
        "cut": sum(r[0] == "cut" for r in results),
        "refused": sum(r[0] == "refused" for r in results),
        "failed": sum(r[0] == "failed" for r in results),
        "wall_s": wall, "window_s": window, "output_tokens": tokens,
        "output_tokens_per_s": tokens / window if window > 0 else 0.0,
        "ttft_ms_p50": 1e3 * percentile(ttft, 0.5) if ttft else None,
        "ttft_ms_p99": 1e3 * percentile(ttft, 0.99) if ttft else None,
        "itl_ms_p50": 1e3 * percentile(gaps, 0.5) if gaps else None,
        "itl_ms_p99": 1e3 * percentile(gaps, 0.99) if gaps else None,
        "itl_ms_mean": 1e3 * statistics.fmean(gaps) if gaps else None,
        "first_failure": next((r[4] for r in results
                               if r[0] == "failed" and len(r) > 4), None),
    }
    def show(value):
        return "-" if value is None else "%.2f" % value
    print("%-18s c=%-3d ok %d cut %d of %d/%d (unsent %d) refused %d failed %d"
          "  %.1f tok/s"
          "  TTFT p50 %s p99 %s ms  ITL p50 %s p99 %s ms" % (
              args.label or "run", args.concurrency, len(ok), summary["cut"],
              len(results), len(work), summary["unsent"], summary["refused"],
              summary["failed"],
              summary["output_tokens_per_s"],
              show(summary["ttft_ms_p50"]), show(summary["ttft_ms_p99"]),
              show(summary["itl_ms_p50"]), show(summary["itl_ms_p99"])))
    if summary["first_failure"]:
        print("  first failure: " + summary["first_failure"])
    if args.json:
        with open(args.json, "w") as out:
            json.dump(summary, out, indent=1)
    return 0 if summary["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
