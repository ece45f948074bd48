"""sits-serve-reference through the real `openai` client (and plain HTTP for
bodies the client cannot send): greedy results equal sits-exec's, requests
batched together equal their lone runs, streaming, chat, stop strings,
max_tokens, bad requests, the bounded queue and the metrics."""

import concurrent.futures
import json
import re
import subprocess
import threading

import pytest

from conftest import (GREEDY, MAX_SEQ_LEN, MODEL, MODEL_NAME, complete, http,
                      metric_values, openai, start_server, token_ids, tool)

PROMPTS = [
    "The quick brown fox",
    "Once upon a time",
    "def main():",
    "1, 2, 3,",
    "Hello",
    "A long prompt that keeps going for a while, so that it spans chunks",
]
EOS = (508, 511)


@pytest.mark.parametrize("prompt", PROMPTS[:3])
def test_greedy_completion_equals_sits_exec(server, reference, prompt):
    prompt_ids, ids, text = reference(prompt, 12)
    response = complete(server.client(), prompt, 12)
    choice = response.choices[0]
    assert token_ids(choice) == ids
    assert choice.text == text
    assert choice.finish_reason == ("stop" if ids[-1] in EOS else "length")
    assert response.usage.prompt_tokens == len(prompt_ids)
    assert response.usage.completion_tokens == len(ids)
    assert response.model == MODEL_NAME
    assert response.object == "text_completion"


def test_chunked_prefill_equals_sits_exec(chunked_server, reference):
    # 3 prompt tokens per step: the long prompt takes several steps.
    prompt = PROMPTS[5]
    prompt_ids, ids, text = reference(prompt, 10)
    assert len(prompt_ids) > 6
    choice = complete(chunked_server.client(), prompt, 10).choices[0]
    assert token_ids(choice) == ids
    assert choice.text == text


def test_token_id_prompt(server, reference):
    prompt_ids, ids, _ = reference(PROMPTS[1], 8)
    choice = complete(server.client(), prompt_ids, 8).choices[0]
    assert token_ids(choice) == ids


def test_concurrent_requests_equal_their_lone_runs(server):
    client = server.client()
    lengths = [20, 5, 14, 9, 17, 3]
    lone = [token_ids(complete(client, p, n, extra_body={"ignore_eos": True})
                      .choices[0]) for p, n in zip(PROMPTS, lengths)]
    before = metric_values(server)
    # Twice as many requests as slots, all at once: some wait and join the
    # running batch between steps.
    jobs = list(zip(PROMPTS, lengths)) * 2
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        results = list(pool.map(
            lambda job: complete(client, job[0], job[1],
                                 extra_body={"ignore_eos": True}), jobs))
    for i, response in enumerate(results):
        assert token_ids(response.choices[0]) == lone[i % len(PROMPTS)], i
        assert response.usage.completion_tokens == lengths[i % len(PROMPTS)]
    after = metric_values(server)
    steps = after["sits_batch_size_count"] - before["sits_batch_size_count"]
    fed = after["sits_batch_size_sum"] - before["sits_batch_size_sum"]
    assert fed > steps, "no step ran more than one sequence"


def test_streaming_completion(server, reference):
    prompt_ids, ids, text = reference(PROMPTS[0], 12)
    stream = server.client().completions.create(
        model=MODEL_NAME, prompt=PROMPTS[0], max_tokens=12, stream=True,
        stream_options={"include_usage": True}, **GREEDY)
    pieces, streamed_ids, reasons, usage = [], [], [], None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            pieces.append(choice.text)
            streamed_ids += choice.model_extra.get("token_ids") or []
            if choice.finish_reason:
                reasons.append(choice.finish_reason)
    assert "".join(pieces) == text
    assert streamed_ids == ids
    assert len([p for p in pieces if p]) > 1, "the text came in one piece"
    assert reasons == ["stop" if ids[-1] in EOS else "length"]
    assert usage.completion_tokens == len(ids)
    assert usage.prompt_tokens == len(prompt_ids)


def chat_prompt_ids(tokenizer_folder, messages):
    """The prompt ids of a conversation as transformers renders it (as
    test/python/test_tokenizer.py uses it)."""
    transformers = pytest.importorskip("transformers")
    config = json.loads((tokenizer_folder / "tokenizer_config.json")
                        .read_text())
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(tokenizer_folder / "tokenizer.json"),
        bos_token=config["bos_token"], eos_token=config["eos_token"])
    tokenizer.chat_template = config["chat_template"]
    return list(tokenizer.apply_chat_template(
        messages, tokenize=True, add_generation_prompt=True,
        return_dict=True)["input_ids"])


def test_chat_equals_completion_of_the_template(server, tokenizer_folder):
    messages = [{"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Name a colour."}]
    client = server.client()
    chat = client.chat.completions.create(model=MODEL_NAME, messages=messages,
                                          max_tokens=10, **GREEDY)
    ids = chat_prompt_ids(tokenizer_folder, messages)
    plain = complete(client, ids, 10)
    assert chat.object == "chat.completion"
    assert chat.usage.prompt_tokens == len(ids)
    assert chat.choices[0].message.role == "assistant"
    assert chat.choices[0].message.content == plain.choices[0].text
    assert token_ids(chat.choices[0]) == token_ids(plain.choices[0])

    stream = client.chat.completions.create(model=MODEL_NAME,
                                            messages=messages, max_tokens=10,
                                            stream=True, **GREEDY)
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks
                      if c.choices)
    assert content == chat.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == chat.choices[0].finish_reason


def test_stop_strings(server):
    client = server.client()
    full = complete(client, PROMPTS[3], 24,
                    extra_body={"ignore_eos": True}).choices[0].text
    # A stop string from the middle of the text: the text ends before its
    # first occurrence.
    candidates = [full[i:i + 3] for i in range(2, len(full) - 3)
                  if full[i:i + 3].strip() and full.find(full[i:i + 3]) > 0]
    assert candidates, "no usable stop string in %r" % full
    stop = candidates[0]
    choice = complete(client, PROMPTS[3], 24, stop=["\u2603never", stop],
                      extra_body={"ignore_eos": True}).choices[0]
    assert choice.text == full[:full.find(stop)]
    assert choice.finish_reason == "stop"
    # Streaming cuts the same way.
    stream = client.completions.create(model=MODEL_NAME, prompt=PROMPTS[3],
                                       max_tokens=24, stop=stop, stream=True,
                                       extra_body={"ignore_eos": True},
                                       **GREEDY)
    assert "".join(c.choices[0].text for c in stream if c.choices) == \
        full[:full.find(stop)]


def test_max_tokens_and_sampling(server):
    client = server.client()
    response = complete(client, PROMPTS[4], 7, extra_body={"ignore_eos": True})
    assert response.usage.completion_tokens == 7
    assert response.choices[0].finish_reason == "length"
    # Sampling with a seed is repeatable, and differs from greedy somewhere.
    sampled = [complete(client, PROMPTS[4], 16, temperature=1.5, seed=seed,
                        top_p=0.95, extra_body={"ignore_eos": True})
               for seed in (1, 1, 2)]
    assert token_ids(sampled[0].choices[0]) == token_ids(sampled[1].choices[0])
    greedy = token_ids(complete(client, PROMPTS[4], 16,
                                extra_body={"ignore_eos": True}).choices[0])
    assert any(token_ids(s.choices[0]) != greedy for s in sampled)


def test_models_and_health(server):
    models = server.client().models.list()
    assert [m.id for m in models.data] == [MODEL_NAME]
    status, _, body = http(server.base_url, "GET", "/health")
    assert status == 200 and body == {"status": "ok"}


def expect_error(status_wanted, call):
    with pytest.raises(openai.APIStatusError) as caught:
        call()
    assert caught.value.status_code == status_wanted, caught.value
    error = caught.value.body
    assert isinstance(error, dict) and error.get("message"), error
    return error


def test_bad_requests_through_the_client(server):
    client = server.client()
    error = expect_error(404, lambda: client.completions.create(
        model="no-such-model", prompt="x", max_tokens=2))
    assert "no-such-model" in error["message"]
    error = expect_error(413, lambda: client.completions.create(
        model=MODEL_NAME, prompt=[1] * (MAX_SEQ_LEN + 5), max_tokens=2))
    assert error["code"] == "context_length_exceeded"
    expect_error(413, lambda: client.completions.create(
        model=MODEL_NAME, prompt="hi", max_tokens=MAX_SEQ_LEN))
    error = expect_error(422, lambda: client.completions.create(
        model=MODEL_NAME, prompt="hi", max_tokens=2,
        extra_body={"temperature": "hot"}))
    assert error["param"] == "temperature"
    error = expect_error(422, lambda: client.completions.create(
        model=MODEL_NAME, prompt=[3, 100000], max_tokens=2))
    assert "100000" in error["message"]
    expect_error(422, lambda: client.completions.create(
        model=MODEL_NAME, prompt="hi", max_tokens=0))
    expect_error(422, lambda: client.completions.create(
        model=MODEL_NAME, prompt="hi", max_tokens=2, stop=[""]))
    expect_error(422, lambda: client.chat.completions.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": 5}]))


@pytest.mark.parametrize("path,body,status,param", [
    ("/v1/completions", b"{not json", 400, None),
    ("/v1/completions", b"[1, 2]", 400, None),
    ("/v1/completions", b'{"model": "llama-gqa-test"}', 400, "prompt"),
    ("/v1/completions", b'{"prompt": "hi"}', 400, "model"),
    ("/v1/completions",
     b'{"model": "llama-gqa-test", "prompt": "hi", "max_token": 3}', 400,
     "max_token"),
    ("/v1/completions",
     b'{"model": "llama-gqa-test", "prompt": "hi", "max_tokens": "3"}', 422,
     "max_tokens"),
    ("/v1/completions",
     b'{"model": "llama-gqa-test", "prompt": {"a": 1}}', 422, "prompt"),
    ("/v1/completions",
     b'{"model": "llama-gqa-test", "prompt": "hi", "stream": "yes"}', 422,
     "stream"),
    ("/v1/chat/completions", b'{"model": "llama-gqa-test"}', 400, "messages"),
    ("/v1/chat/completions",
     b'{"model": "llama-gqa-test", "messages": []}', 422, "messages"),
    ("/v1/chat/completions",
     b'{"model": "llama-gqa-test", "messages": "hi"}', 422, "messages"),
    ("/v1/nothing", b"{}", 404, None),
])
def test_bad_requests_over_http(server, path, body, status, param):
    got, headers, error = http(server.base_url, "POST", path, raw=body)
    assert got == status, error
    assert headers["Content-Type"].startswith("application/json")
    assert error["error"]["message"], error
    assert error["error"]["param"] == param, error
    # The server is still up and answers the next request.
    assert http(server.base_url, "GET", "/health")[0] == 200


def test_queue_full_gets_429_and_a_closed_stream_frees_the_slot(
        tmp_path_factory, tokenizer_folder):
    # One slot and no waiting queue: while a long request runs, the next is
    # refused at once.
    # A longer context, so that the long request surely runs on.
    tight = start_server(tmp_path_factory, tokenizer_folder, "--max-batch=1",
                         "--max-queue=0", "--retry-after=7",
                         pipeline=["--max-seq-len=1024"])
    try:
        client = tight.client()
        stream = client.completions.create(
            model=MODEL_NAME, prompt="Once", max_tokens=1000,
            stream=True, extra_body={"ignore_eos": True}, **GREEDY)
        next(iter(stream))  # it runs
        with pytest.raises(openai.RateLimitError) as caught:
            complete(client, "Hello", 2)
        assert caught.value.status_code == 429
        assert caught.value.response.headers["Retry-After"] == "7"
        assert "busy" in caught.value.body["message"]
        # Closing the stream cancels its request; the slot frees up.
        stream.close()
        for _ in range(200):
            try:
                response = complete(client, "Hello", 2)
                break
            except openai.RateLimitError:
                threading.Event().wait(0.05)
        else:
            pytest.fail("the slot stayed taken after the stream closed")
        assert response.usage.completion_tokens >= 1
        values = metric_values(tight)
        assert values['sits_requests_rejected_total{reason="queue_full"}'] >= 1
        assert values['sits_requests_finished_total{reason="cancelled"}'] == 1
    finally:
        tight.stop()


def test_a_closed_stream_leaves_the_queue_before_it_runs(
        tmp_path_factory, tokenizer_folder):
    # One slot: while a long request runs, a second stream waits; its
    # client closes the stream before a token comes. The server finds that
    # out while the request waits (a stream without events gets an SSE
    # comment every half second, and the write fails), so the request is
    # cancelled without ever taking the slot.
    tight = start_server(tmp_path_factory, tokenizer_folder, "--max-batch=1",
                         "--max-queue=4", pipeline=["--max-seq-len=8192"])
    try:
        client = tight.client()
        running = client.completions.create(
            model=MODEL_NAME, prompt="Once", max_tokens=8000, stream=True,
            extra_body={"ignore_eos": True}, **GREEDY)
        chunks = iter(running)
        next(chunks)  # it runs
        waiting = client.completions.create(
            model=MODEL_NAME, prompt="Hello", max_tokens=4, stream=True,
            **GREEDY)
        waiting.close()
        # The running stream is read slowly meanwhile: its request cannot
        # end before the check (a token at most every 10 ms).
        values = {}
        for _ in range(300):
            next(chunks)
            values = metric_values(tight)
            if values['sits_requests_finished_total{reason="cancelled"}'] >= 1:
                break
            threading.Event().wait(0.01)
        else:
            pytest.fail("the closed stream's request was not cancelled")
        assert values['sits_requests_finished_total{reason="length"}'] == 0
        assert values["sits_queue_length"] == 0
        running.close()
    finally:
        tight.stop()


def test_metrics(server):
    before = metric_values(server)
    response = complete(server.client(), PROMPTS[2], 6,
                        extra_body={"ignore_eos": True})
    after = metric_values(server)
    delta = lambda name: after.get(name, 0) - before.get(name, 0)
    assert delta("sits_generation_tokens_total") == \
        response.usage.completion_tokens == 6
    assert delta("sits_prompt_tokens_total") == response.usage.prompt_tokens
    # One prompt, prefilled (this server's chunks are long enough) in a
    # step that samples the first token; the other five each in a decode
    # step.
    kind = lambda name, kind: delta('%s{kind="%s"}' % (name, kind))
    assert kind("sits_step_prompt_tokens_total", "prefill") == \
        response.usage.prompt_tokens
    assert kind("sits_step_sampled_rows_total", "prefill") == 1
    assert kind("sits_step_sampled_rows_total", "decode") == 5
    assert kind("sits_step_duration_seconds_count", "decode") == 5
    assert kind("sits_step_duration_seconds_count", "bulk") == 0
    assert delta("sits_time_to_first_token_seconds_count") == 1
    assert delta("sits_inter_token_latency_seconds_count") == 5
    assert delta('sits_requests_finished_total{reason="length"}') == 1
    assert delta('sits_http_responses_total{code="200"}') >= 2
    assert after["sits_queue_length"] == 0
    assert after["sits_running_requests"] == 0
    assert after['sits_time_to_first_token_seconds_bucket{le="+Inf"}'] == \
        after["sits_time_to_first_token_seconds_count"]
    for name in ("sits_batch_size", "sits_inter_token_latency_seconds",
                 "sits_step_duration_seconds"):
        assert re.search(r"^# TYPE %s histogram$" % name,
                         http(server.base_url, "GET", "/metrics")[2], re.M)


def test_body_too_large(chunked_server):
    body = json.dumps({"model": MODEL_NAME, "prompt": "x" * 5000}).encode()
    status, _, error = http(chunked_server.base_url, "POST", "/v1/completions",
                            raw=body)
    assert status == 413
    assert "4096 bytes" in error["error"]["message"]


@pytest.mark.parametrize("arguments,message", [
    (["/nonexistent/model.onnx"], "cannot import"),
    ([str(MODEL), "--port=abc"], "--port expects an integer"),
    ([str(MODEL), "--max-queue"], "--max-queue needs a value"),
    ([str(MODEL), "--tokenizer=/nonexistent"], "/nonexistent"),
])
def test_command_line_errors(arguments, message):
    result = subprocess.run([tool("sits-serve-reference"), *arguments],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert message in result.stderr


def test_port_in_use(server, tokenizer_folder):
    result = subprocess.run(
        [tool("sits-serve-reference"), str(MODEL),
         "--tokenizer=" + str(tokenizer_folder), "--port=%d" % server.port],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "cannot listen on 127.0.0.1:%d" % server.port in result.stderr


def test_sigterm_ends_running_requests(tmp_path_factory, tokenizer_folder):
    # A stream still running when the server stops ends with an error event,
    # and the server exits with 0 (ServerProcess.stop checks that).
    process = start_server(tmp_path_factory, tokenizer_folder,
                           "--max-batch=1", pipeline=["--max-seq-len=1024"])
    stopped = False
    try:
        stream = process.client().completions.create(
            model=MODEL_NAME, prompt="Once", max_tokens=1000, stream=True,
            extra_body={"ignore_eos": True}, **GREEDY)
        chunks = iter(stream)
        next(chunks)
        failures = []

        def stop():
            try:
                process.stop()
            except AssertionError as error:
                failures.append(error)

        stopper = threading.Thread(target=stop)
        stopper.start()
        with pytest.raises(openai.APIError) as caught:
            for _ in chunks:
                pass
        assert "shutting down" in str(caught.value)
        stopper.join(timeout=90)
        assert not stopper.is_alive(), "the server did not stop"
        stopped = True
        assert not failures, failures
    finally:
        if not stopped:
            process.process.kill()


# A long shared prefix (a system prompt) and different questions after it.
SHARED_PREFIX = ("You are a helpful assistant. Answer briefly and exactly, "
                 "with no more words than needed. ")
QUESTIONS = ["What is two plus two?", "Name a colour.", "Say hello.",
             "Count to three."]


@pytest.fixture(scope="session")
def prefix_server(tmp_path_factory, tokenizer_folder):
    """Two slots, prompts fed 5 tokens per step, a prefix cache of 64
    blocks of 4 tokens."""
    process = start_server(tmp_path_factory, tokenizer_folder,
                           "--max-batch=2", "--max-prefill-chunk=5",
                           "--prefix-cache-blocks=64",
                           "--prefix-block-tokens=4")
    yield process
    process.stop()


def expected_hits(prompts_ids, block):
    """Prompt tokens a prefix cache with room for every block gives requests
    run in this order: the longest cached run of whole blocks, leaving the
    last prompt token; each prompt then caches all its full blocks."""
    cached, hits = set(), 0
    for ids in prompts_ids:
        blocks = 0
        while (blocks < (len(ids) - 1) // block and
               tuple(ids[:(blocks + 1) * block]) in cached):
            blocks += 1
        hits += blocks * block
        for b in range(1, len(ids) // block + 1):
            cached.add(tuple(ids[:b * block]))
    return hits


def test_prefix_cache_gives_the_same_tokens_and_hits(server, prefix_server,
                                                     reference):
    prompts = [SHARED_PREFIX + q for q in QUESTIONS]
    prompt_ids = [reference(p, 1)[0] for p in prompts]
    # Without the cache (the plain server), one at a time.
    want = [token_ids(complete(server.client(), p, 8,
                               extra_body={"ignore_eos": True}).choices[0])
            for p in prompts]
    before = metric_values(prefix_server)
    client = prefix_server.client()
    # The first request fills the cache; the others, one at a time and
    # then all at once, start from its blocks.
    got = [token_ids(complete(client, p, 8, extra_body={"ignore_eos": True})
                     .choices[0]) for p in prompts]
    assert got == want
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
        again = list(pool.map(
            lambda p: token_ids(complete(client, p, 8,
                                         extra_body={"ignore_eos": True})
                                .choices[0]), prompts))
    assert again == want
    after = metric_values(prefix_server)
    delta = lambda name: after[name] - before.get(name, 0)
    prompt_tokens = delta("sits_prefix_cache_prompt_tokens_total")
    hits = delta("sits_prefix_cache_hit_tokens_total")
    assert prompt_tokens == 2 * sum(len(ids) for ids in prompt_ids)
    # The second round finds everything the first cached, in any order.
    assert hits == expected_hits(prompt_ids * 2, 4)
    assert hits > prompt_tokens / 2
    assert after["sits_prefix_cache_hit_rate"] > 0
    assert after["sits_prefix_cache_blocks_used"] > 0
    assert after["sits_prefix_cache_blocks_used"] + \
        after["sits_prefix_cache_blocks_free"] == 64
    # Prefilled tokens are the prompt tokens the cache did not give.
    assert delta("sits_prefill_tokens_total") == prompt_tokens - hits


def test_prefix_cache_eviction_keeps_tokens(server, tmp_path_factory,
                                            tokenizer_folder):
    # A pool of 6 blocks for prompts of 16 blocks or more: blocks are
    # evicted and replaced all the time, a prompt caches only what the
    # blocks held by others leave; tokens stay those of the plain server.
    tight = start_server(tmp_path_factory, tokenizer_folder, "--max-batch=2",
                         "--prefix-cache-blocks=6", "--prefix-block-tokens=4")
    try:
        prompts = [SHARED_PREFIX + q for q in QUESTIONS] + \
            [q + SHARED_PREFIX for q in QUESTIONS]
        want = [token_ids(complete(server.client(), p, 5).choices[0])
                for p in prompts]
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            got = list(pool.map(
                lambda p: token_ids(complete(tight.client(), p, 5)
                                    .choices[0]), prompts * 2))
        assert got == want * 2
        values = metric_values(tight)
        assert values["sits_prefix_cache_blocks_used"] <= 6
        assert values["sits_prefix_cache_hit_tokens_total"] > 0
    finally:
        tight.stop()


def test_sla_target_limits_the_batch(server, tmp_path_factory,
                                     tokenizer_folder):
    # A target no step meets (10 us): every window with tokens is over it,
    # so the admitted limit halves from 4 to 1 while requests run; results
    # stay those of the plain server.
    sla = start_server(tmp_path_factory, tokenizer_folder, "--max-batch=4",
                       "--sla-p99-token-ms=0.01")
    try:
        values = metric_values(sla)
        assert values["sits_admitted_batch_limit"] == 4
        # Enough tokens to run for several windows at every limit.
        lengths = [90, 60, 80, 70, 85, 75, 65, 95] * 2
        prompts = (PROMPTS * 3)[:len(lengths)]
        want = [token_ids(complete(server.client(), p, n,
                                   extra_body={"ignore_eos": True})
                          .choices[0]) for p, n in zip(prompts, lengths)]
        # Each halving waits for a window over the target and skips the next
        # one, so how many rounds it takes to reach 1 depends on this
        # machine's speed: run rounds until it does, at most eight.
        for _ in range(8):
            with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
                got = list(pool.map(
                    lambda job: token_ids(complete(
                        sla.client(), job[0], job[1],
                        extra_body={"ignore_eos": True}).choices[0]),
                    zip(prompts, lengths)))
            assert got == want
            values = metric_values(sla)
            if values["sits_admitted_batch_limit"] == 1:
                break
        assert values["sits_admitted_batch_limit"] == 1
        assert values["sits_sla_window_p99_seconds"] > 0.00001
        # Every gap is over the target: the tail ledger is all slow, so no
        # bulk step ran beside a decoding stream (some may have run alone).
        assert values["sits_sla_tail_share"] == 1
        assert values["sits_sla_bulk_steps_total"] >= 0
    finally:
        sla.stop()


@pytest.mark.parametrize("option,message", [
    ("--prefix-block-tokens=128", "do not fit the context"),
    ("--sla-p99-token-ms=fast", "--sla-p99-token-ms expects a number"),
    ("--sla-tail-share=1", "--sla-tail-share expects a number"),
    ("--retry-after=0", "--retry-after expects an integer from 1"),
])
def test_serving_option_errors(tokenizer_folder, option, message):
    result = subprocess.run(
        [tool("sits-serve-reference"), str(MODEL),
         "--tokenizer=" + str(tokenizer_folder), "--port=0",
         "--prefix-cache-blocks=8", "--max-seq-len=128", option],
        capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
