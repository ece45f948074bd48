"""sits: run compiled transformer engines (.sits files) from Python.

    import sits
    engine = sits.Engine("model.sits")
    print(engine.generate("def main(", max_new_tokens=32).text)
    for piece in engine.stream("def main(", max_new_tokens=32):
        print(piece, end="", flush=True)

    tokenizer = sits.Tokenizer.from_engine("model.sits")   # no GPU needed
    tokenizer.encode("hello"), tokenizer.decode([1, 2, 3])

Every failure is a `sits.Error` whose `code` is a `sits.ErrorCode`
(NoGpu, InvalidEngine, PromptTooLong, ...). See docs/python.md.
"""

from ._core import (
    Engine,
    Error,
    ErrorCode,
    Generation,
    GenerationStats,
    Tokenizer,
)

try:  # only in packages built with the CUDA toolkit
    from ._core import Stream
except ImportError:  # pragma: no cover
    pass

__all__ = [
    "Engine",
    "Error",
    "ErrorCode",
    "Generation",
    "GenerationStats",
    "Stream",
    "Tokenizer",
]
__version__ = "0.1.0"
