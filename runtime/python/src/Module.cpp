//===- Module.cpp - The native module of the `sits` Python package --------===//
//
// Binds the runtime's text interface (ModelTokenizer: tokenizer, chat
// template) and, where the package was built with the CUDA toolkit, the
// engine and its generation (Engine, Session::generateText). Every
// sits::Error becomes a `sits.Error` carrying the runtime's error code.
// Long calls release the GIL; streaming runs the generation on a worker
// thread that never touches Python objects.
//
//===----------------------------------------------------------------------===//

#include "Bindings.h"

#include "sits/EngineFormat.h"

namespace py = pybind11;

namespace sits::python {

namespace {

/// The `sits.Error` type (never freed: exit order would otherwise matter).
py::object *errorType = nullptr;

} // namespace

/// A `str` as UTF-8; `bytes` as they are (which may be invalid UTF-8: the
/// tokenizer then refuses them with InvalidText, as it would from C++).
std::string textArgument(const py::handle &text, const char *what) {
  if (py::isinstance<py::bytes>(text))
    return text.cast<std::string>();
  if (!py::isinstance<py::str>(text))
    throw py::type_error(
        std::string(what) + " must be str or bytes, not " +
        std::string(py::str(py::type::of(text).attr("__name__"))));
  PyObject *utf8 = PyUnicode_AsUTF8String(text.ptr());
  if (!utf8) {
    PyErr_Clear();
    throw Error(ErrorCode::InvalidText,
                std::string(what) + " cannot be encoded as UTF-8 (it holds a "
                                    "lone surrogate)");
  }
  py::bytes bytes = py::reinterpret_steal<py::bytes>(utf8);
  return bytes.cast<std::string>();
}

namespace {

/// Python's json.dumps of a value the caller gave (messages, tools).
std::string toJson(const py::handle &value, const char *what) {
  try {
    return py::module_::import("json")
        .attr("dumps")(value, py::arg("ensure_ascii") = false)
        .cast<std::string>();
  } catch (const py::error_already_set &error) {
    throw py::type_error(std::string(what) +
                         " cannot be written as JSON: " + error.what());
  }
}

} // namespace

std::vector<int32_t> idsArgument(const py::handle &ids, const char *what) {
  if (py::isinstance<py::str>(ids) || py::isinstance<py::bytes>(ids) ||
      !py::isinstance<py::sequence>(ids))
    throw py::type_error(std::string(what) +
                         " must be a sequence of token ids");
  std::vector<int32_t> result;
  for (py::handle item : ids) {
    if (!py::isinstance<py::int_>(item) || py::isinstance<py::bool_>(item))
      throw py::type_error(std::string(what) + " must hold only integers");
    long long value = PyLong_AsLongLong(item.ptr());
    if (value == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      value = INT64_MAX;
    }
    if (value < INT32_MIN || value > INT32_MAX)
      throw Error(ErrorCode::TokenOutOfVocab,
                  std::string(what) + " holds " +
                      py::str(item).cast<std::string>() + ", not a token id");
    result.push_back(static_cast<int32_t>(value));
  }
  return result;
}

std::vector<int32_t> encodeChatArgument(const ModelTokenizer &tokenizer,
                                        const py::handle &messages,
                                        bool addGenerationPrompt,
                                        const py::handle &tools,
                                        const py::dict &extra) {
  std::string rendered =
      renderChat(tokenizer, messages, addGenerationPrompt, tools, extra);
  py::gil_scoped_release release;
  return tokenizer.tokenizer()->encode(rendered, /*addSpecialTokens=*/false);
}

std::string renderChat(const ModelTokenizer &tokenizer,
                       const py::handle &messages, bool addGenerationPrompt,
                       const py::handle &tools, const py::dict &extra) {
  if (!py::isinstance<py::sequence>(messages) ||
      py::isinstance<py::str>(messages))
    throw py::type_error("messages must be a list of message dicts");
  std::string messagesJson = toJson(messages, "messages");
  std::string toolsJson = tools.is_none() ? "" : toJson(tools, "tools");
  std::string extraJson = extra.empty() ? "" : toJson(extra, "the keywords");
  py::gil_scoped_release release;
  return tokenizer.applyChatTemplateJson(messagesJson, addGenerationPrompt,
                                         toolsJson, extraJson);
}

void bindTokenizer(py::module_ &m) {
  py::class_<ModelTokenizer, std::shared_ptr<ModelTokenizer>>(
      m, "Tokenizer",
      "A model's tokenizer: tokenizer.json, its special tokens and chat "
      "template. Identical ids to the `tokenizers` package.")
      .def_static(
          "from_folder",
          [](const std::string &folder) {
            return std::const_pointer_cast<ModelTokenizer>(
                ModelTokenizer::fromFiles(ModelTokenizer::readFolder(folder)));
          },
          py::arg("folder"),
          "Loads tokenizer.json, tokenizer_config.json, chat_template.jinja "
          "and generation_config.json from a model's folder.")
      .def_static(
          "from_engine",
          [](const std::string &path) {
            std::string error;
            auto file = format::EngineFile::open(path, &error);
            if (!file)
              throw Error(ErrorCode::InvalidEngine, error);
            format::Header header;
            format::EngineContents contents;
            format::RuntimeConfig config;
            if (!format::readEngine(*file, {}, &header, &contents, &config,
                                    &error))
              throw Error(ErrorCode::InvalidEngine, path + ": " + error);
            auto tokenizer = ModelTokenizer::fromEngine(contents, config);
            if (!tokenizer)
              throw Error(ErrorCode::NoTokenizer,
                          path + " holds no tokenizer (it takes token ids)");
            return std::const_pointer_cast<ModelTokenizer>(tokenizer);
          },
          py::arg("path"),
          "The tokenizer stored in an engine file (no GPU needed).")
      .def(
          "encode",
          [](const ModelTokenizer &t, const py::handle &text,
             bool addSpecialTokens) {
            std::string utf8 = textArgument(text, "text");
            py::gil_scoped_release release;
            return t.tokenizer()->encode(utf8, addSpecialTokens);
          },
          py::arg("text"), py::arg("add_special_tokens") = true,
          "Token ids of `text`, as `tokenizers`' encode(...).ids.")
      .def(
          "decode",
          [](const ModelTokenizer &t, const py::handle &ids,
             bool skipSpecialTokens) {
            std::vector<int32_t> list = idsArgument(ids, "ids");
            py::gil_scoped_release release;
            return t.decode(list, skipSpecialTokens);
          },
          py::arg("ids"), py::arg("skip_special_tokens") = true)
      .def(
          "apply_chat_template",
          [](const ModelTokenizer &t, const py::handle &messages,
             bool addGenerationPrompt, bool tokenize, const py::handle &tools,
             const py::kwargs &kwargs) -> py::object {
            py::dict extra(kwargs);
            if (tokenize)
              return py::cast(encodeChatArgument(
                  t, messages, addGenerationPrompt, tools, extra));
            return py::cast(
                renderChat(t, messages, addGenerationPrompt, tools, extra));
          },
          py::arg("messages"), py::arg("add_generation_prompt") = false,
          py::arg("tokenize") = true, py::arg("tools") = py::none(),
          "The prompt of a conversation through the model's chat template, "
          "with transformers' defaults (ids unless tokenize=False, no "
          "generation prompt unless asked); more template variables as "
          "keywords.")
      .def("token_to_id",
           [](const ModelTokenizer &t, const std::string &token) {
             return t.tokenizer()->tokenToId(token);
           })
      .def("id_to_token",
           [](const ModelTokenizer &t, int32_t id) -> py::object {
             if (id < 0 || uint32_t(id) >= t.vocabSize())
               return py::none();
             return py::cast(t.tokenizer()->idToToken(id));
           })
      .def_property_readonly("kind", &ModelTokenizer::kind)
      .def_property_readonly("vocab_size", &ModelTokenizer::vocabSize)
      .def_property_readonly("bos_token",
                             [](const ModelTokenizer &t) -> py::object {
                               if (t.bosToken().empty())
                                 return py::none();
                               return py::cast(t.bosToken());
                             })
      .def_property_readonly("eos_token",
                             [](const ModelTokenizer &t) -> py::object {
                               if (t.eosToken().empty())
                                 return py::none();
                               return py::cast(t.eosToken());
                             })
      .def_property_readonly("bos_token_id", &ModelTokenizer::bosTokenId)
      .def_property_readonly("eos_token_ids", &ModelTokenizer::eosTokenIds)
      .def_property_readonly("has_chat_template",
                             &ModelTokenizer::hasChatTemplate)
      .def_property_readonly("chat_template",
                             [](const ModelTokenizer &t) -> py::object {
                               if (!t.hasChatTemplate())
                                 return py::none();
                               return py::cast(t.chatTemplateSource());
                             })
      .def("__repr__", [](const ModelTokenizer &t) {
        return "<sits.Tokenizer " + t.kind() + ", " +
               std::to_string(t.vocabSize()) + " tokens>";
      });
}

} // namespace sits::python

PYBIND11_MODULE(_core, m) {
  using namespace sits;
  m.doc() = "The native part of the sits package (see `sits`).";

  py::enum_<ErrorCode>(m, "ErrorCode")
      .value("InvalidArgument", ErrorCode::InvalidArgument)
      .value("InvalidEngine", ErrorCode::InvalidEngine)
      .value("NoGpu", ErrorCode::NoGpu)
      .value("WrongGpu", ErrorCode::WrongGpu)
      .value("PromptTooLong", ErrorCode::PromptTooLong)
      .value("TokenOutOfVocab", ErrorCode::TokenOutOfVocab)
      .value("KVCacheFull", ErrorCode::KVCacheFull)
      .value("Cuda", ErrorCode::Cuda)
      .value("InvalidTokenizer", ErrorCode::InvalidTokenizer)
      .value("InvalidText", ErrorCode::InvalidText)
      .value("NoTokenizer", ErrorCode::NoTokenizer)
      .value("TemplateError", ErrorCode::TemplateError);

  // sits.Error(message) with .code: one exception type, so that callers
  // catch everything the runtime reports at once and branch on the code.
  python::errorType = new py::object(py::reinterpret_borrow<py::object>(
      py::exception<Error>(m, "Error", PyExc_RuntimeError)));
  py::register_exception_translator([](std::exception_ptr pending) {
    try {
      if (pending)
        std::rethrow_exception(pending);
    } catch (const Error &error) {
      py::object instance = (*python::errorType)(error.what());
      instance.attr("code") = py::cast(error.code());
      PyErr_SetObject(python::errorType->ptr(), instance.ptr());
    }
  });

  python::bindTokenizer(m);
  python::bindEngine(m);
}
