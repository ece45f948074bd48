"""Text in, text out from Python: load an engine, chat with it, stream a
completion, and tokenize without a GPU.

    pip install .                      # builds the `sits` package
    sitsc MODEL_DIR/model.onnx -o model.sits   # tokenizer.json beside it
    python3 examples/python/chat.py model.sits "What is a KV cache?"
"""

import sys

import sits


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: chat.py ENGINE MESSAGE")
    path, message = sys.argv[1], sys.argv[2]

    # The tokenizer stored in the engine; reading it needs no GPU.
    tokenizer = sits.Tokenizer.from_engine(path)
    print(f"{tokenizer!r}: {len(tokenizer.encode(message))} tokens in the "
          "message", file=sys.stderr)

    try:
        engine = sits.Engine(path)
    except sits.Error as error:
        sys.exit(f"cannot load {path} ({error.code.name}): {error}")

    if tokenizer.has_chat_template:
        messages = [{"role": "user", "content": message}]
        # The KV cache holds the prompt and the reply.
        prompt = tokenizer.apply_chat_template(messages,
                                               add_generation_prompt=True)
        reply = engine.chat(messages,
                            max_new_tokens=min(128, engine.max_seq_len -
                                               len(prompt)),
                            temperature=0.7, top_p=0.9, seed=1)
        print(reply.text)
        print(f"[{reply.finish_reason}] {reply.stats}", file=sys.stderr)
    else:
        # No chat template: the message is a prompt to continue, streamed.
        budget = engine.max_seq_len - len(tokenizer.encode(message))
        stream = engine.stream(message, max_new_tokens=min(128, budget),
                               stop=["\n\n"])
        for piece in stream:
            print(piece, end="", flush=True)
        print()
        print(f"[{stream.result.finish_reason}] {stream.result.stats}",
              file=sys.stderr)


if __name__ == "__main__":
    main()
