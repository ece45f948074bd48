//===- Bindings.h - Pieces of the sits Python module ------------*- C++ -*-===//

#ifndef SITS_RUNTIME_PYTHON_BINDINGS_H
#define SITS_RUNTIME_PYTHON_BINDINGS_H

#include "sits/ModelTokenizer.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

namespace sits::python {

/// Token ids from a Python sequence of ints (InvalidArgument otherwise).
std::vector<int32_t> idsArgument(const pybind11::handle &ids, const char *what);
/// The chat template's text for Python messages (a list of dicts), tools (a
/// list or None) and extra template variables.
std::string renderChat(const ModelTokenizer &tokenizer,
                       const pybind11::handle &messages,
                       bool addGenerationPrompt, const pybind11::handle &tools,
                       const pybind11::dict &extra);
/// renderChat, encoded without added special tokens (the template writes
/// them), as apply_chat_template(tokenize=True).
std::vector<int32_t> encodeChatArgument(const ModelTokenizer &tokenizer,
                                        const pybind11::handle &messages,
                                        bool addGenerationPrompt,
                                        const pybind11::handle &tools,
                                        const pybind11::dict &extra);
/// Prompt text (str) or bytes as UTF-8 bytes.
std::string textArgument(const pybind11::handle &text, const char *what);

void bindTokenizer(pybind11::module_ &m);
/// sits.Engine, sits.Generation, sits.Stream; without CUDA an Engine whose
/// constructor raises NoGpu.
void bindEngine(pybind11::module_ &m);

} // namespace sits::python

#endif // SITS_RUNTIME_PYTHON_BINDINGS_H
