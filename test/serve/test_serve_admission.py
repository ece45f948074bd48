"""sits-serve-reference with a paged KV cache's accounting (--kv-layout=paged:
a bounded pool of blocks, as a paged engine's) through the real `openai`
client: more requests at once than the pool holds all complete with the
tokens they get alone, greedy and seeded, while requests wait for blocks
and running ones step aside and recompute; a prompt longer than the pool is
refused at once; a seeded request gives the same tokens whatever runs
beside it; and an int8 KV cache kept in the pool, with prefix caching,
gives the tokens of the same cache served contiguous."""

import concurrent.futures
import subprocess

import pytest

from conftest import (MODEL, MODEL_NAME, complete, completion_ids, http,
                      metric_values, openai, start_server, token_ids, tool)
from test_serve import QUESTIONS, SHARED_PREFIX

PROMPTS = ["The quick brown fox", "Once upon a time", "def main():",
           "1, 2, 3,", "Hello", "A short one"]
SAMPLED = {"temperature": 1.2, "top_p": 0.95}
POOL = 8


def job_options(i):
    """Every third request samples with a seed of its own; the others are
    greedy. EOS is ignored so that every request runs its full length."""
    options = {"extra_body": {"ignore_eos": True}}
    if i % 3 == 1:
        options.update(SAMPLED, seed=100 + i)
    return options


@pytest.fixture(scope="module")
def paged_server(tmp_path_factory, tokenizer_folder):
    """Four slots of 128 tokens, and a pool of 8 blocks of 16: two full
    sequences' worth."""
    process = start_server(tmp_path_factory, tokenizer_folder,
                           "--max-batch=4", "--max-queue=32",
                           "--kv-layout=paged", "--kv-block-tokens=16",
                           "--kv-pool-blocks=%d" % POOL)
    yield process
    process.stop()


def test_more_requests_than_the_pool_holds_get_their_lone_tokens(
        server, paged_server):
    # Prompts of one block growing to four (60 tokens): four start with a
    # block each to grow into, then cannot all grow, and the newest steps
    # aside until blocks come back. Twelve at once over four slots.
    jobs = [(PROMPTS[i % len(PROMPTS)], i) for i in range(12)]
    # Alone, on the server without a pool.
    lone = [token_ids(complete(server.client(), prompt, 50,
                               **job_options(i)).choices[0])
            for prompt, i in jobs]
    before = metric_values(paged_server)
    client = paged_server.client()
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        results = list(pool.map(
            lambda job: complete(client, job[0], 50, **job_options(job[1])),
            jobs))
    for (prompt, i), response in zip(jobs, results):
        choice = response.choices[0]
        assert token_ids(choice) == lone[i], (i, prompt)
        assert choice.finish_reason == "length"
        assert response.usage.completion_tokens == 50
    after = metric_values(paged_server)
    delta = lambda name: after[name] - before.get(name, 0)
    assert delta('sits_requests_finished_total{reason="length"}') == 12
    assert delta('sits_requests_finished_total{reason="error"}') == 0
    assert delta("sits_requests_preempted_total") > 0, \
        "no request stepped aside: the pool was never short"
    # Every block came back.
    assert after["sits_kv_blocks_used"] == 0
    assert after["sits_kv_blocks_free"] == POOL
    assert after["sits_running_requests"] == 0
    assert after["sits_queue_length"] == 0


def test_paged_prefix_cache_shares_blocks(server, tmp_path_factory,
                                          tokenizer_folder):
    # The prefix cache takes the pool's blocks of 16 and shares them; the
    # tokens are the plain server's, one at a time and at once.
    prompts = [SHARED_PREFIX + q for q in QUESTIONS]
    cached = start_server(tmp_path_factory, tokenizer_folder, "--max-batch=2",
                          "--kv-layout=paged", "--kv-block-tokens=16",
                          "--kv-pool-blocks=12", "--prefix-cache-blocks=8",
                          "--prefix-block-tokens=4")
    try:
        options = {"extra_body": {"ignore_eos": True}}
        want = completion_ids(server.client(), prompts, 8, **options)
        client = cached.client()
        assert completion_ids(client, prompts, 8, **options) == want
        assert completion_ids(client, prompts, 8, at_once=True,
                              **options) == want
        values = metric_values(cached)
        assert values["sits_prefix_cache_hit_tokens_total"] > 0
        assert values["sits_prefix_cache_hit_tokens_total"] % 16 == 0
        assert values["sits_kv_blocks_used"] == 0
    finally:
        cached.stop()


QUANT = ["--kv-cache=int8", "--kv-hot-window=8", "--kv-channel-block=8"]


def test_paged_quantized_cache_and_its_prefix_cache(tmp_path_factory,
                                                    tokenizer_folder):
    # An int8 KV cache (hot window 8, per-channel key blocks of 8) kept in a
    # pool of 12 blocks of 16 with prefix caching: the tokens of the same
    # quantized cache served contiguous without a prefix cache, one request
    # at a time and four at once (some stepping aside for blocks).
    prompts = [SHARED_PREFIX + q for q in QUESTIONS]
    plain = start_server(tmp_path_factory, tokenizer_folder, "--max-batch=2",
                         *QUANT)
    paged = start_server(tmp_path_factory, tokenizer_folder, "--max-batch=4",
                         *QUANT, "--kv-layout=paged", "--kv-block-tokens=16",
                         "--kv-pool-blocks=12", "--prefix-cache-blocks=8")
    try:
        options = {"extra_body": {"ignore_eos": True}}
        want = completion_ids(plain.client(), prompts, 24, **options)
        client = paged.client()
        assert completion_ids(client, prompts, 24, **options) == want
        assert completion_ids(client, prompts, 24, at_once=True,
                              **options) == want
        values = metric_values(paged)
        assert values["sits_prefix_cache_hit_tokens_total"] > 0
        assert values["sits_kv_blocks_used"] == 0
    finally:
        plain.stop()
        paged.stop()


def test_a_prompt_longer_than_the_pool_is_refused(tmp_path_factory,
                                                  tokenizer_folder):
    # 4 blocks of 16: 64 tokens, less than the 128 a slot holds. The context
    # served is the pool's; a request beyond it gets a 413 at once.
    small = start_server(tmp_path_factory, tokenizer_folder, "--max-batch=2",
                         "--kv-layout=paged", "--kv-block-tokens=16",
                         "--kv-pool-blocks=4")
    try:
        client = small.client()
        models = client.models.list()
        assert models.data[0].model_extra["max_model_len"] == 64
        with pytest.raises(openai.APIStatusError) as caught:
            complete(client, [1] * 70, 2)
        assert caught.value.status_code == 413
        assert caught.value.body["code"] == "context_length_exceeded"
        assert "64 tokens" in caught.value.body["message"]
        # What fits runs, alone in the pool.
        response = complete(client, [1] * 40, 24,
                            extra_body={"ignore_eos": True})
        assert response.usage.completion_tokens == 24
    finally:
        small.stop()


def test_seed_is_honoured_whatever_runs_beside(server):
    # The same seeded request alone, then beside five others (other seeds,
    # greedy, other prompts) that start before and after it, in whatever
    # slot it lands: the same tokens. Draws are keyed by the seed and the
    # token's position, never by the slot or the step.
    client = server.client()
    seeded = dict(SAMPLED, seed=4242, extra_body={"ignore_eos": True})
    alone = token_ids(complete(client, PROMPTS[1], 24, **seeded).choices[0])
    greedy = token_ids(complete(client, PROMPTS[1], 24,
                                extra_body={"ignore_eos": True}).choices[0])
    assert alone != greedy, "sampling drew the greedy tokens"
    others = [(PROMPTS[0], dict(SAMPLED, seed=1)), (PROMPTS[2], {}),
              (PROMPTS[1], dict(SAMPLED, seed=2)), (PROMPTS[3], {}),
              (PROMPTS[4], dict(SAMPLED, seed=4242))]
    for rounds in range(2):
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            futures = [pool.submit(complete, client, p, 30,
                                   extra_body={"ignore_eos": True}, **o)
                       for p, o in others[:3]]
            mine = pool.submit(complete, client, PROMPTS[1], 24, **seeded)
            futures += [pool.submit(complete, client, p, 30,
                                    extra_body={"ignore_eos": True}, **o)
                        for p, o in others[3:]]
            assert token_ids(mine.result().choices[0]) == alone, rounds
            for future in futures:
                assert future.result().usage.completion_tokens == 30


@pytest.mark.parametrize("options,message", [
    (["--kv-layout=pages"], "--kv-layout must be contiguous or paged"),
    (["--kv-pool-blocks=4"], "--kv-pool-blocks needs --kv-layout=paged"),
    (["--kv-layout=paged", "--kv-block-tokens=10"],
     "--kv-block-tokens must be a power of two from 16 to 1024, got 10"),
    (["--kv-cache=int4", "--kv-hot-window=4", "--kv-channel-block=32",
      "--kv-layout=paged", "--kv-block-tokens=16"],
     "a paged quantized KV cache needs --kv-block-tokens (16) a multiple of "
     "the per-channel key block (32"),
])
def test_paged_option_errors(tokenizer_folder, options, message):
    result = subprocess.run(
        [tool("sits-serve-reference"), str(MODEL),
         "--tokenizer=" + str(tokenizer_folder), "--port=0",
         "--max-seq-len=128", *options],
        capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
