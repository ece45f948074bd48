"""sits-serve (the server over a GPU engine) through the `openai` client:
greedy results of an fp32 engine equal sits-exec's on the CPU reference,
also with requests batched together and prompts in chunks. Skips without a
GPU (unless SITS_REQUIRE_GPU=1) or without sitsc and sits-serve. With
prefix caching too: the same tokens, and the hits expected; over an
engine with a paged KV cache, whose prefix blocks are shared, not copied;
and over a paged int8 KV cache, whose prefix hits give the tokens of the
contiguous one without them."""

import concurrent.futures
import os
import subprocess

import pytest

from conftest import (MAX_SEQ_LEN, MODEL, MODEL_NAME, ServerDidNotStart,
                      ServerProcess, complete, completion_ids, metric_values,
                      token_ids, tool)
from test_serve import PROMPTS, QUESTIONS, SHARED_PREFIX, expected_hits

EXIT_NO_GPU = 4


def compile_engine(tmp_path_factory, tokenizer_folder, *options):
    out = tmp_path_factory.mktemp("engine") / "llama_gqa.sits"
    result = subprocess.run(
        [tool("sitsc"), str(MODEL), "-o", str(out),
         "--tokenizer=" + str(tokenizer_folder), "--dtype=fp32",
         "--max-seq-len=%d" % MAX_SEQ_LEN, "--max-batch=4", *options],
        capture_output=True, text=True)
    if (result.returncode != 0 and "NVRTC" in result.stderr and
            os.environ.get("SITS_REQUIRE_GPU") != "1"):
        pytest.skip("sitsc cannot compile here: " + result.stderr.strip())
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def engine(tmp_path_factory, tokenizer_folder):
    return compile_engine(tmp_path_factory, tokenizer_folder)


@pytest.fixture(scope="module")
def paged_engine(tmp_path_factory, tokenizer_folder):
    """Blocks of 16 tokens; a pool of 20, fewer than 4 sequences of 128."""
    return compile_engine(tmp_path_factory, tokenizer_folder,
                          "--kv-layout=paged", "--kv-block-tokens=16",
                          "--kv-pool-blocks=20")


def start_gpu_server(tmp_path_factory, engine, *options):
    log = tmp_path_factory.mktemp("gpu-server") / "stderr.txt"
    try:
        return ServerProcess([tool("sits-serve"), str(engine), "--port=0",
                              "--model-name=" + MODEL_NAME, *options], log)
    except ServerDidNotStart as error:
        if (error.exit_code == EXIT_NO_GPU and
                os.environ.get("SITS_REQUIRE_GPU") != "1"):
            pytest.skip("no usable GPU: " + str(error).splitlines()[-1])
        raise


@pytest.fixture(scope="module")
def gpu_server(tmp_path_factory, engine):
    process = start_gpu_server(tmp_path_factory, engine)
    yield process
    process.stop()


@pytest.mark.parametrize("prompt", PROMPTS[:3])
def test_gpu_greedy_equals_sits_exec(gpu_server, reference, prompt):
    _, ids, text = reference(prompt, 12)
    choice = complete(gpu_server.client(), prompt, 12).choices[0]
    assert token_ids(choice) == ids
    assert choice.text == text


def test_gpu_batched_and_chunked_equal_lone_runs(tmp_path_factory, engine,
                                                 reference):
    chunked = start_gpu_server(tmp_path_factory, engine,
                               "--max-prefill-chunk=3")
    try:
        client = chunked.client()
        expected = [reference(p, 10)[1] for p in PROMPTS]
        with concurrent.futures.ThreadPoolExecutor(len(PROMPTS) * 2) as pool:
            results = list(pool.map(lambda p: complete(client, p, 10),
                                    PROMPTS * 2))
        for i, response in enumerate(results):
            assert token_ids(response.choices[0]) == expected[i % len(PROMPTS)]
    finally:
        chunked.stop()


def test_gpu_prefix_cache_equals_sits_exec(tmp_path_factory, engine,
                                           reference):
    # Requests sharing a long prefix, one at a time and then all at once:
    # the blocks copied on the GPU give sits-exec's tokens.
    cached = start_gpu_server(tmp_path_factory, engine,
                              "--prefix-cache-blocks=64",
                              "--prefix-block-tokens=4",
                              "--max-prefill-chunk=5")
    try:
        client = cached.client()
        prompts = [SHARED_PREFIX + q for q in QUESTIONS]
        expected = [reference(p, 8) for p in prompts]
        got = completion_ids(client, prompts, 8)
        assert got == [ids for _, ids, _ in expected]
        assert completion_ids(client, prompts, 8, at_once=True) == got
        values = metric_values(cached)
        prompt_ids = [ids for ids, _, _ in expected]
        assert values["sits_prefix_cache_hit_tokens_total"] == \
            expected_hits(prompt_ids * 2, 4)
        assert values["sits_prefix_cache_blocks_used"] > 0
    finally:
        cached.stop()


def test_gpu_paged_prefix_cache_shares_blocks(tmp_path_factory, paged_engine,
                                              reference):
    # The paged engine's prefix cache takes the engine's blocks of 16
    # (whatever --prefix-block-tokens says) and shares them: the tokens of
    # sits-exec, alone and at once, chunked. One at a time, the hits are the
    # ones expected. At once, the 20-block pool runs short and the session
    # takes back blocks only the prefix cache holds (those requests then
    # prefill in full): how many depends on timing, so the hits only lie
    # between the first round's and a cache that lost nothing.
    cached = start_gpu_server(tmp_path_factory, paged_engine,
                              "--prefix-cache-blocks=8",
                              "--prefix-block-tokens=4",
                              "--max-prefill-chunk=5")
    try:
        client = cached.client()
        prompts = [SHARED_PREFIX + q for q in QUESTIONS] + PROMPTS
        expected = [reference(p, 8) for p in prompts]
        prompt_ids = [ids for ids, _, _ in expected]
        got = completion_ids(client, prompts, 8)
        assert got == [ids for _, ids, _ in expected]
        first = metric_values(cached)["sits_prefix_cache_hit_tokens_total"]
        assert first == expected_hits(prompt_ids, 16) > 0
        assert completion_ids(client, prompts, 8, at_once=True) == got
        total = metric_values(cached)["sits_prefix_cache_hit_tokens_total"]
        assert first < total <= expected_hits(prompt_ids * 2, 16)
    finally:
        cached.stop()


def test_gpu_paged_pool_admits_requests_by_free_blocks(tmp_path_factory,
                                                       paged_engine,
                                                       reference):
    # Twice as many requests as slots, each growing towards 6 of the 20
    # blocks of 16: requests wait for blocks, and growing ones step aside
    # and recompute. Greedy ones give sits-exec's tokens; seeded ones the
    # tokens they gave alone on the same server.
    server = start_gpu_server(tmp_path_factory, paged_engine,
                              "--max-queue=32")
    seeded = {"temperature": 1.2, "top_p": 0.95,
              "extra_body": {"ignore_eos": True}}
    try:
        client = server.client()
        expected = [reference(p, 80)[1] for p in PROMPTS]
        lone = [token_ids(complete(client, p, 80, seed=7 + i, **seeded)
                          .choices[0]) for i, p in enumerate(PROMPTS)]
        jobs = [(i, False) for i in range(len(PROMPTS))] + \
            [(i, True) for i in range(len(PROMPTS))]

        def run(job):
            i, sample = job
            options = dict(seeded, seed=7 + i) if sample else {}
            return token_ids(complete(client, PROMPTS[i], 80, **options)
                             .choices[0])

        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
            got = list(pool.map(run, jobs))
        for (i, sample), ids in zip(jobs, got):
            assert ids == (lone[i] if sample else expected[i]), (i, sample)
        values = metric_values(server)
        assert values['sits_requests_finished_total{reason="error"}'] == 0
        assert values["sits_kv_blocks_used"] == 0
        assert values["sits_kv_blocks_free"] == 20
    finally:
        server.stop()


def test_gpu_prefill_chunk_beyond_the_engines_is_refused(tmp_path_factory,
                                                          tokenizer_folder):
    # An engine that takes 8 prompt tokens a sequence in a step: a larger
    # --max-prefill-chunk is refused at startup naming both; without one
    # the chunk is the engine's, and long prompts are served.
    small = compile_engine(tmp_path_factory, tokenizer_folder,
                           "--max-prefill-tokens=8")
    with pytest.raises(ServerDidNotStart) as refused:
        start_gpu_server(tmp_path_factory, small, "--max-prefill-chunk=16")
    assert refused.value.exit_code not in (0, EXIT_NO_GPU), str(refused.value)
    assert "chunk of 16 tokens" in str(refused.value)
    assert "(8;" in str(refused.value)
    server = start_gpu_server(tmp_path_factory, small)
    try:
        choice = complete(server.client(), PROMPTS[1], 4).choices[0]
        assert choice.finish_reason == "length"
    finally:
        server.stop()


QUANT_KV = ["--kv-cache=int8", "--kv-hot-window=8", "--kv-channel-block=8"]


def test_gpu_paged_quantized_prefix_cache_keeps_the_tokens(tmp_path_factory,
                                                           tokenizer_folder):
    # An int8 KV cache (hot window 8, key blocks of 8) paged in blocks of 16
    # with the prefix cache (the final blocks shared, the last ones a hit
    # writes again copied, their FP16 rows restored): the tokens of the
    # same cache contiguous without a prefix cache, one request at a time
    # and all at once, with hits.
    contiguous = compile_engine(tmp_path_factory, tokenizer_folder, *QUANT_KV)
    paged = compile_engine(tmp_path_factory, tokenizer_folder, *QUANT_KV,
                           "--kv-layout=paged", "--kv-block-tokens=16")
    plain = start_gpu_server(tmp_path_factory, contiguous)
    cached = start_gpu_server(tmp_path_factory, paged,
                              "--prefix-cache-blocks=16",
                              "--max-prefill-chunk=5")
    try:
        prompts = [SHARED_PREFIX + q for q in QUESTIONS] + PROMPTS
        options = {"extra_body": {"ignore_eos": True}}
        want = completion_ids(plain.client(), prompts, 16, **options)
        client = cached.client()
        assert completion_ids(client, prompts, 16, **options) == want
        assert completion_ids(client, prompts, 16, at_once=True,
                              **options) == want
        assert metric_values(cached)["sits_prefix_cache_hit_tokens_total"] > 0
    finally:
        plain.stop()
        cached.stop()
