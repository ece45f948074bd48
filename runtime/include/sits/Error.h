//===- Error.h - The error type of every sits runtime library ---*- C++ -*-===//
//
// The runtime, the tokenizer, the chat templates and the Python package all
// report failures as one `sits::Error`: a code a program can branch on, and
// one sentence naming the cause. Header-only, so that the CUDA-free libraries
// (tokenizer, chat template, engine format tools) need no runtime library.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_ERROR_H
#define SITS_RUNTIME_ERROR_H

#include <stdexcept>
#include <string>

namespace sits {

enum class ErrorCode {
  InvalidArgument,  ///< a bad option or request (batch size, sampling values)
  InvalidEngine,    ///< the file is not a valid engine (see the message)
  NoGpu,            ///< no CUDA device or driver
  WrongGpu,         ///< the engine was compiled for another GPU
  PromptTooLong,    ///< a prompt exceeds the KV cache capacity
  TokenOutOfVocab,  ///< a prompt token id outside [0, vocab)
  KVCacheFull,      ///< a sequence reached the KV cache capacity mid-generation
  Cuda,             ///< a CUDA call failed (not sticky)
  InvalidTokenizer, ///< a tokenizer.json / tokenizer_config.json is unusable
  InvalidText,      ///< text that is not valid UTF-8
  NoTokenizer,      ///< text in or out, but the engine holds no tokenizer
  TemplateError,    ///< a chat template failed to parse or to render
};

/// A short lower-case name of `code` ("invalid engine").
inline const char *errorCodeName(ErrorCode code) {
  switch (code) {
  case ErrorCode::InvalidArgument:
    return "invalid argument";
  case ErrorCode::InvalidEngine:
    return "invalid engine";
  case ErrorCode::NoGpu:
    return "no GPU";
  case ErrorCode::WrongGpu:
    return "wrong GPU";
  case ErrorCode::PromptTooLong:
    return "prompt too long";
  case ErrorCode::TokenOutOfVocab:
    return "token out of vocabulary";
  case ErrorCode::KVCacheFull:
    return "KV cache full";
  case ErrorCode::Cuda:
    return "CUDA error";
  case ErrorCode::InvalidTokenizer:
    return "invalid tokenizer";
  case ErrorCode::InvalidText:
    return "invalid text";
  case ErrorCode::NoTokenizer:
    return "no tokenizer";
  case ErrorCode::TemplateError:
    return "template error";
  }
  return "error";
}

class Error : public std::runtime_error {
public:
  Error(ErrorCode code, const std::string &message)
      : std::runtime_error(message), errorCode(code) {}
  ErrorCode code() const { return errorCode; }

private:
  ErrorCode errorCode;
};

} // namespace sits

#endif // SITS_RUNTIME_ERROR_H
