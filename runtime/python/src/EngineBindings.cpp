//===- EngineBindings.cpp - sits.Engine, generation and streaming ---------===//
//
// One sits::Session per Python Engine, used by one generation at a time (a
// mutex; the GIL is released while waiting and while generating). A Stream
// runs its generation on a worker thread that hands text pieces to the
// iterator through a queue; the thread never touches Python objects, and
// closing or dropping the stream ends the generation at the next token.
//
//===----------------------------------------------------------------------===//

#include "Bindings.h"

#if SITS_PYTHON_HAS_CUDA
#include "sits/Runtime.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#endif

namespace py = pybind11;

namespace sits::python {

namespace {

/// The statistics of one generate call, as Python sees them.
struct Stats {
  uint32_t batch = 0;
  uint32_t promptTokens = 0, generatedTokens = 0;
  double timeToFirstTokenMs = 0, msPerToken = 0, tokensPerSecond = 0;
};

/// One sequence's result.
struct Generation {
  std::string text;
  std::vector<int32_t> tokenIds, promptTokenIds;
  std::string finishReason;
  Stats stats;
};

void bindResults(py::module_ &m) {
  py::class_<Stats>(m, "GenerationStats")
      .def_readonly("batch", &Stats::batch)
      .def_readonly("prompt_tokens", &Stats::promptTokens,
                    "prompt tokens of all sequences")
      .def_readonly("generated_tokens", &Stats::generatedTokens,
                    "generated tokens of all sequences")
      .def_readonly("time_to_first_token_ms", &Stats::timeToFirstTokenMs)
      .def_readonly("ms_per_token", &Stats::msPerToken, "decode time per step")
      .def_readonly("tokens_per_second", &Stats::tokensPerSecond,
                    "decode tokens of all sequences per second")
      .def("__repr__", [](const Stats &s) {
        return "GenerationStats(prompt_tokens=" +
               std::to_string(s.promptTokens) +
               ", generated_tokens=" + std::to_string(s.generatedTokens) +
               ", ms_per_token=" + std::to_string(s.msPerToken) + ")";
      });
  py::class_<Generation>(m, "Generation")
      .def_readonly("text", &Generation::text)
      .def_readonly("token_ids", &Generation::tokenIds)
      .def_readonly("prompt_token_ids", &Generation::promptTokenIds)
      .def_readonly("finish_reason", &Generation::finishReason,
                    "'length', 'eos', 'stop' or 'cancelled'")
      .def_readonly("stats", &Generation::stats)
      .def("__repr__", [](const Generation &g) {
        return "Generation(text=" +
               py::repr(py::str(g.text)).cast<std::string>() +
               ", finish_reason='" + g.finishReason + "', " +
               std::to_string(g.tokenIds.size()) + " tokens)";
      });
}

#if SITS_PYTHON_HAS_CUDA

struct EngineHolder {
  std::shared_ptr<Engine> engine;
  std::unique_ptr<Session> session;
  std::mutex busy;
  std::string path;
};

/// The prompts of a call: one (str, bytes or a list of ids) or a batch (a
/// list of those), as ids.
struct Prompts {
  std::vector<std::vector<int32_t>> ids;
  bool batched = false;
};

Prompts promptsArgument(const EngineHolder &holder, const py::handle &prompt) {
  Prompts result;
  auto one = [&](const py::handle &item) {
    if (py::isinstance<py::str>(item) || py::isinstance<py::bytes>(item)) {
      const std::shared_ptr<const ModelTokenizer> &tokenizer =
          holder.engine->tokenizer();
      if (!tokenizer)
        throw Error(ErrorCode::NoTokenizer,
                    "this engine holds no tokenizer: give token ids");
      std::string text = textArgument(item, "prompt");
      py::gil_scoped_release release;
      return tokenizer->encode(text);
    }
    return idsArgument(item, "prompt");
  };
  bool isList = py::isinstance<py::sequence>(prompt) &&
                !py::isinstance<py::str>(prompt) &&
                !py::isinstance<py::bytes>(prompt);
  if (isList && py::len(prompt) > 0) {
    py::handle first = prompt[py::int_(0)];
    if (!py::isinstance<py::int_>(first)) {
      result.batched = true;
      for (py::handle item : prompt)
        result.ids.push_back(one(item));
      return result;
    }
  }
  result.ids.push_back(one(prompt));
  return result;
}

TextGenerateParams paramsArgument(int64_t maxNewTokens, double temperature,
                                  double topP, int64_t topK, uint64_t seed,
                                  const std::vector<std::string> &stop,
                                  bool ignoreEos, bool skipSpecialTokens) {
  if (maxNewTokens < 1 || maxNewTokens > INT32_MAX)
    throw Error(ErrorCode::InvalidArgument,
                "max_new_tokens must be at least 1, got " +
                    std::to_string(maxNewTokens));
  if (topK < 0 || topK > INT32_MAX)
    throw Error(ErrorCode::InvalidArgument,
                "top_k must be 0 (all) or a positive count, got " +
                    std::to_string(topK));
  TextGenerateParams params;
  params.generate.maxNewTokens = static_cast<uint32_t>(maxNewTokens);
  params.generate.sampling.temperature = static_cast<float>(temperature);
  params.generate.sampling.topP = static_cast<float>(topP);
  params.generate.sampling.topK = static_cast<uint32_t>(topK);
  params.generate.sampling.seed = seed;
  params.generate.stopAtEos = !ignoreEos;
  params.stop = stop;
  params.skipSpecialTokens = skipSpecialTokens;
  return params;
}

Session &sessionOf(EngineHolder &holder) {
  if (!holder.session)
    holder.session = std::make_unique<Session>(holder.engine);
  return *holder.session;
}

std::vector<Generation> toGenerations(const TextResult &result,
                                      const Prompts &prompts) {
  Stats stats;
  stats.batch = result.stats.batch;
  stats.promptTokens = result.stats.promptTokens;
  stats.generatedTokens = result.stats.generatedTokens;
  stats.timeToFirstTokenMs = result.stats.prefillMs;
  stats.msPerToken = result.stats.decodeMsPerStep;
  stats.tokensPerSecond = result.stats.tokensPerSecond;
  std::vector<Generation> out;
  for (size_t i = 0; i < result.text.size(); ++i)
    out.push_back({result.text[i], result.tokens[i], prompts.ids[i],
                   finishReasonName(result.finishReasons[i]), stats});
  return out;
}

/// An engine without a tokenizer generates ids only: the texts stay empty,
/// and stop strings (which need text) are refused.
TextResult generateIds(Session &session,
                       const std::vector<std::vector<int32_t>> &prompts,
                       const TextGenerateParams &params) {
  if (!params.stop.empty())
    throw Error(ErrorCode::NoTokenizer,
                "stop strings need text: this engine holds no tokenizer");
  GenerateResult ids = session.generate(prompts, params.generate);
  const std::vector<int32_t> &eos = session.engine()->config().eosTokenIds;
  TextResult result;
  result.text.assign(prompts.size(), "");
  result.tokens = std::move(ids.tokens);
  result.stats = ids.stats;
  for (const std::vector<int32_t> &tokens : result.tokens)
    result.finishReasons.push_back(
        params.generate.stopAtEos && !tokens.empty() &&
                std::find(eos.begin(), eos.end(), tokens.back()) != eos.end()
            ? FinishReason::EndOfSequence
            : FinishReason::Length);
  return result;
}

/// Runs a generation now (the GIL released): a Generation, or a list of
/// them for a batch.
py::object generateNow(const std::shared_ptr<EngineHolder> &h,
                       const Prompts &prompts,
                       const TextGenerateParams &params) {
  TextResult result;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> busy(h->busy);
    result = h->engine->tokenizer()
                 ? sessionOf(*h).generateText(prompts.ids, params)
                 : generateIds(sessionOf(*h), prompts.ids, params);
  }
  std::vector<Generation> out = toGenerations(result, prompts);
  if (prompts.batched)
    return py::cast(out);
  return py::cast(out.front());
}

/// Defines `name(first, *, max_new_tokens, temperature, ...)` on the Engine
/// class: the sampling keywords are declared here once for generate,
/// stream and chat.
template <typename Class, typename Body>
void defGenerate(Class &cls, const char *name, Body body, const char *doc,
                 py::arg first) {
  cls.def(
      name,
      [body](const std::shared_ptr<EngineHolder> &h, const py::handle &input,
             int64_t maxNewTokens, double temperature, double topP,
             int64_t topK, uint64_t seed, const std::vector<std::string> &stop,
             bool ignoreEos, bool skipSpecialTokens) {
        return body(h, input,
                    paramsArgument(maxNewTokens, temperature, topP, topK, seed,
                                   stop, ignoreEos, skipSpecialTokens));
      },
      first, py::kw_only(), py::arg("max_new_tokens") = 16,
      py::arg("temperature") = 0.0, py::arg("top_p") = 1.0,
      py::arg("top_k") = 0, py::arg("seed") = 0,
      py::arg("stop") = std::vector<std::string>(),
      py::arg("ignore_eos") = false, py::arg("skip_special_tokens") = true,
      doc);
}

/// What a stream's worker and its iterator share.
struct StreamState {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::string> pieces;
  bool done = false;
  bool cancel = false;
  std::exception_ptr error;
  TextResult result;
};

class Stream {
public:
  Stream(std::shared_ptr<EngineHolder> holder, Prompts prompts,
         TextGenerateParams params)
      : holder(std::move(holder)), prompts(std::move(prompts)),
        state(std::make_shared<StreamState>()) {
    worker = std::thread([h = this->holder, ids = this->prompts.ids,
                          params = std::move(params), st = state]() {
      try {
        std::lock_guard<std::mutex> busy(h->busy);
        TextResult result = sessionOf(*h).generateText(
            ids, params, [&](uint32_t, const std::string &piece) {
              std::lock_guard<std::mutex> lock(st->mutex);
              if (st->cancel)
                return false;
              st->pieces.push_back(piece);
              st->ready.notify_one();
              return true;
            });
        std::lock_guard<std::mutex> lock(st->mutex);
        st->result = std::move(result);
      } catch (...) {
        std::lock_guard<std::mutex> lock(st->mutex);
        st->error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(st->mutex);
      st->done = true;
      st->ready.notify_one();
    });
  }
  ~Stream() { close(); }

  std::string next() {
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(state->mutex);
      state->ready.wait(lock,
                        [&] { return !state->pieces.empty() || state->done; });
      if (!state->pieces.empty()) {
        std::string piece = std::move(state->pieces.front());
        state->pieces.pop_front();
        return piece;
      }
    }
    join();
    if (state->error)
      std::rethrow_exception(state->error);
    finished = true;
    throw py::stop_iteration();
  }

  /// Ends the generation at its next token and waits for the worker.
  void close() {
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      state->cancel = true;
    }
    py::gil_scoped_release release;
    join();
  }

  Generation result() {
    if (!finished)
      throw Error(ErrorCode::InvalidArgument,
                  "the stream's result is known once it is exhausted");
    return toGenerations(state->result, prompts).front();
  }

private:
  void join() {
    if (worker.joinable())
      worker.join();
  }

  std::shared_ptr<EngineHolder> holder;
  Prompts prompts;
  std::shared_ptr<StreamState> state;
  std::thread worker;
  bool finished = false;
};

#endif

} // namespace

void bindEngine(py::module_ &m) {
  bindResults(m);
#if SITS_PYTHON_HAS_CUDA
  py::class_<Stream>(m, "Stream",
                     "An iterator over the text of one generation as it "
                     "arrives; `result` after it is exhausted.")
      .def("__iter__", [](Stream &s) -> Stream & { return s; })
      .def("__next__", &Stream::next)
      .def("close", &Stream::close, "End the generation at its next token.")
      .def_property_readonly("result", &Stream::result);

  py::class_<EngineHolder, std::shared_ptr<EngineHolder>> engine(
      m, "Engine", "A compiled .sits engine loaded on a GPU.");
  engine
      .def(py::init([](const std::string &path, int device, bool cudaGraphs,
                       bool verifyHash) {
             auto holder = std::make_shared<EngineHolder>();
             LoadOptions options;
             options.device = device;
             options.verifyContentHash = verifyHash;
             {
               py::gil_scoped_release release;
               holder->engine = Engine::load(path, options);
               SessionOptions sessionOptions;
               sessionOptions.useCudaGraphs = cudaGraphs;
               holder->session =
                   std::make_unique<Session>(holder->engine, sessionOptions);
             }
             holder->path = path;
             return holder;
           }),
           py::arg("path"), py::arg("device") = 0,
           py::arg("cuda_graphs") = true, py::arg("verify_hash") = true)
      .def_property_readonly("tokenizer",
                             [](const EngineHolder &h) {
                               return std::const_pointer_cast<ModelTokenizer>(
                                   h.engine->tokenizer());
                             })
      .def_property_readonly(
          "vocab_size",
          [](const EngineHolder &h) { return h.engine->config().vocabSize; })
      .def_property_readonly(
          "max_batch",
          [](const EngineHolder &h) { return h.engine->config().maxBatch; })
      .def_property_readonly(
          "max_seq_len",
          [](const EngineHolder &h) { return h.engine->config().maxSeqLen; })
      .def_property_readonly(
          "device_name",
          [](const EngineHolder &h) { return h.engine->deviceName(); })
      .def("__repr__", [](const EngineHolder &h) {
        return "<sits.Engine '" + h.path + "' on " + h.engine->deviceName() +
               ">";
      });
  defGenerate(
      engine, "generate",
      [](const std::shared_ptr<EngineHolder> &h, const py::handle &prompt,
         const TextGenerateParams &params) {
        return generateNow(h, promptsArgument(*h, prompt), params);
      },
      "Generates from a prompt (text or token ids) or a batch of them.",
      py::arg("prompt"));
  defGenerate(
      engine, "stream",
      [](const std::shared_ptr<EngineHolder> &h, const py::handle &prompt,
         const TextGenerateParams &params) {
        Prompts prompts = promptsArgument(*h, prompt);
        if (prompts.batched)
          throw Error(ErrorCode::InvalidArgument,
                      "stream takes one prompt; use generate for a batch");
        return std::make_unique<Stream>(h, std::move(prompts), params);
      },
      "Like generate for one prompt, as an iterator over the text.",
      py::arg("prompt"));
  defGenerate(
      engine, "chat",
      [](const std::shared_ptr<EngineHolder> &h, const py::handle &messages,
         const TextGenerateParams &params) {
        const std::shared_ptr<const ModelTokenizer> &tokenizer =
            h->engine->tokenizer();
        if (!tokenizer)
          throw Error(ErrorCode::NoTokenizer, "this engine holds no tokenizer");
        Prompts prompts;
        prompts.ids.push_back(encodeChatArgument(*tokenizer, messages, true,
                                                 py::none(), py::dict()));
        return generateNow(h, std::move(prompts), params);
      },
      "Generates the reply to a conversation (a list of {'role', "
      "'content'} dicts) through the model's chat template.",
      py::arg("messages"));
#else
  // Built without the CUDA toolkit: the tokenizer works, engines cannot run.
  struct NoEngine {};
  py::class_<NoEngine>(m, "Engine")
      .def(py::init([](const std::string &, int, bool, bool) -> NoEngine * {
             throw Error(ErrorCode::NoGpu,
                         "this sits package was built without the CUDA "
                         "toolkit: it can tokenize but not run engines");
           }),
           py::arg("path"), py::arg("device") = 0,
           py::arg("cuda_graphs") = true, py::arg("verify_hash") = true);
#endif
}

} // namespace sits::python
