//===- Format.cpp - Names, element types, expressions ---------------------===//

#include "format/Bytes.h"
#include "sits/EngineFormat.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace sits {
namespace format {

const char *sectionKindName(uint32_t kind) {
  switch (static_cast<SectionKind>(kind)) {
  case SectionKind::Metadata:
    return "metadata";
  case SectionKind::Kernels:
    return "kernels";
  case SectionKind::Plan:
    return "plan";
  case SectionKind::Weights:
    return "weights";
  case SectionKind::Tokenizer:
    return "tokenizer";
  case SectionKind::PersistentDecode:
    return "persistent decode";
  }
  return "unknown";
}

const char *dtypeName(DType type) {
  switch (type) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::U8:
    return "u8";
  case DType::I8:
    return "i8";
  case DType::I4X2:
    return "i4x2";
  }
  return "invalid";
}

uint64_t dtypeBytes(DType type) {
  switch (type) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I64:
    return 8;
  case DType::U8:
  case DType::I8:
  case DType::I4X2:
    return 1;
  }
  return 0;
}

bool parseDType(const std::string &text, DType *type) {
  static const struct {
    const char *name;
    DType type;
  } kNames[] = {
      {"f32", DType::F32},   {"fp32", DType::F32},      {"float32", DType::F32},
      {"f16", DType::F16},   {"fp16", DType::F16},      {"float16", DType::F16},
      {"bf16", DType::BF16}, {"bfloat16", DType::BF16}, {"i32", DType::I32},
      {"int32", DType::I32}, {"i64", DType::I64},       {"int64", DType::I64},
      {"u8", DType::U8},     {"uint8", DType::U8},      {"i8", DType::I8},
      {"int8", DType::I8},   {"i4x2", DType::I4X2}};
  for (const auto &entry : kNames) {
    if (text == entry.name) {
      *type = entry.type;
      return true;
    }
  }
  return false;
}

const char *symbolName(uint32_t symbol) {
  switch (symbol) {
  case 0:
    return "B";
  case 1:
    return "S";
  case 2:
    return "T";
  case 3:
    return "M";
  }
  return "?";
}

const char *bufferRoleName(uint32_t role) {
  static const char *kNames[kNumBufferRoles] = {
      "weight",    "activation",   "key_cache",    "value_cache",
      "token_ids", "past_lengths", "step_lengths", "logits"};
  return role < kNumBufferRoles ? kNames[role] : "unknown";
}

//===----------------------------------------------------------------------===//
// Half and bfloat16
//===----------------------------------------------------------------------===//

uint16_t floatToHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  uint32_t sign = (bits >> 16) & 0x8000;
  uint32_t exponent = (bits >> 23) & 0xff;
  uint32_t mantissa = bits & 0x7fffff;
  if (exponent == 0xff) // Inf or NaN (keep NaN quiet and non-zero).
    return static_cast<uint16_t>(sign | 0x7c00 | (mantissa ? 0x200 : 0));
  int32_t halfExp = static_cast<int32_t>(exponent) - 127 + 15;
  if (halfExp >= 31)
    return static_cast<uint16_t>(sign | 0x7c00);
  if (halfExp <= 0) {
    // Subnormal half (or zero): shift in the implicit bit, round to even.
    if (halfExp < -10)
      return static_cast<uint16_t>(sign);
    uint32_t full = mantissa | 0x800000;
    uint32_t shift = static_cast<uint32_t>(14 - halfExp);
    uint32_t result = full >> shift;
    uint32_t rest = full & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (result & 1)))
      ++result;
    return static_cast<uint16_t>(sign | result);
  }
  uint32_t result = (static_cast<uint32_t>(halfExp) << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (result & 1)))
    ++result; // may carry into the exponent, up to infinity: correct
  return static_cast<uint16_t>(sign | result);
}

float halfToFloat(uint16_t half) {
  uint32_t sign = static_cast<uint32_t>(half & 0x8000) << 16;
  uint32_t exponent = (half >> 10) & 0x1f;
  uint32_t mantissa = half & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000 | (mantissa << 13);
  } else if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {
      float v = std::ldexp(static_cast<float>(mantissa), -24);
      return sign ? -v : v;
    }
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

uint16_t floatToBFloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7f800000) == 0x7f800000 && (bits & 0x7fffff))
    return static_cast<uint16_t>((bits >> 16) | 0x40); // quiet NaN
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float bfloat16ToFloat(uint16_t value) {
  uint32_t bits = static_cast<uint32_t>(value) << 16;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

Expr Expr::constant(int64_t value) {
  Expr e;
  e.terms.push_back({ExprOp::Const, value});
  return e;
}

Expr Expr::symbol(Symbol symbol) {
  Expr e;
  e.terms.push_back({ExprOp::Symbol, static_cast<int64_t>(symbol)});
  return e;
}

static Expr binary(const Expr &lhs, const Expr &rhs, ExprOp op) {
  Expr e = lhs;
  e.terms.insert(e.terms.end(), rhs.terms.begin(), rhs.terms.end());
  e.terms.push_back({op, 0});
  return e;
}

Expr operator+(const Expr &l, const Expr &r) {
  return binary(l, r, ExprOp::Add);
}
Expr operator-(const Expr &l, const Expr &r) {
  return binary(l, r, ExprOp::Sub);
}
Expr operator*(const Expr &l, const Expr &r) {
  return binary(l, r, ExprOp::Mul);
}
Expr floorDiv(const Expr &l, const Expr &r) {
  return binary(l, r, ExprOp::Div);
}
Expr ceilDiv(const Expr &l, const Expr &r) {
  return binary(l, r, ExprOp::CeilDiv);
}
Expr min(const Expr &l, const Expr &r) { return binary(l, r, ExprOp::Min); }
Expr max(const Expr &l, const Expr &r) { return binary(l, r, ExprOp::Max); }

SymbolValues makeSymbols(int64_t batch, int64_t seq, int64_t multiprocessors) {
  return {batch, seq, batch * seq, multiprocessors};
}

SymbolValues makePackedSymbols(int64_t batch, int64_t seq, int64_t tokens,
                               int64_t multiprocessors) {
  return {batch, seq, tokens, multiprocessors};
}

bool checkExpr(const Expr &expr, std::string *error) {
  if (expr.terms.empty() || expr.terms.size() > kMaxExprOps) {
    *error = "expression has " + std::to_string(expr.terms.size()) +
             " terms (1 to " + std::to_string(kMaxExprOps) + " allowed)";
    return false;
  }
  int depth = 0;
  for (const ExprTerm &term : expr.terms) {
    uint32_t op = static_cast<uint32_t>(term.op);
    if (op >= kNumExprOps) {
      *error = "expression has unknown operation " + std::to_string(op);
      return false;
    }
    if (term.op == ExprOp::Const) {
      ++depth;
    } else if (term.op == ExprOp::Symbol) {
      if (term.value < 0 || term.value >= kNumSymbols) {
        *error =
            "expression refers to unknown symbol " + std::to_string(term.value);
        return false;
      }
      ++depth;
    } else {
      if (depth < 2) {
        *error = "expression has an operation without two operands";
        return false;
      }
      --depth;
    }
  }
  if (depth != 1) {
    *error =
        "expression leaves " + std::to_string(depth) + " values instead of one";
    return false;
  }
  return true;
}

bool evalExpr(const Expr &expr, const SymbolValues &symbols, int64_t *result,
              std::string *error) {
  int64_t stack[kMaxExprOps];
  int depth = 0;
  for (const ExprTerm &term : expr.terms) {
    if (term.op == ExprOp::Const) {
      stack[depth++] = term.value;
      continue;
    }
    if (term.op == ExprOp::Symbol) {
      stack[depth++] = symbols[static_cast<size_t>(term.value)];
      continue;
    }
    int64_t b = stack[--depth];
    int64_t a = stack[depth - 1];
    int64_t r = 0;
    bool overflow = false;
    switch (term.op) {
    case ExprOp::Add:
      overflow = __builtin_add_overflow(a, b, &r);
      break;
    case ExprOp::Sub:
      overflow = __builtin_sub_overflow(a, b, &r);
      break;
    case ExprOp::Mul:
      overflow = __builtin_mul_overflow(a, b, &r);
      break;
    case ExprOp::Div:
    case ExprOp::CeilDiv:
      if (b <= 0) {
        *error = "expression " + expr.toString() + " divides by " +
                 std::to_string(b);
        return false;
      }
      r = a / b;
      if ((a % b != 0) && ((a < 0) == (term.op == ExprOp::Div)))
        r += a < 0 ? -1 : 1; // floor for Div, ceiling for CeilDiv
      break;
    case ExprOp::Min:
      r = a < b ? a : b;
      break;
    case ExprOp::Max:
      r = a > b ? a : b;
      break;
    default:
      *error = "malformed expression";
      return false;
    }
    if (overflow) {
      *error = "expression " + expr.toString() + " overflows";
      return false;
    }
    stack[depth - 1] = r;
  }
  if (depth != 1) {
    *error = "malformed expression";
    return false;
  }
  *result = stack[0];
  return true;
}

std::string Expr::toString() const {
  std::vector<std::string> stack;
  for (const ExprTerm &term : terms) {
    if (term.op == ExprOp::Const) {
      stack.push_back(std::to_string(term.value));
      continue;
    }
    if (term.op == ExprOp::Symbol) {
      stack.push_back(symbolName(static_cast<uint32_t>(term.value)));
      continue;
    }
    if (stack.size() < 2)
      return "<malformed>";
    std::string b = stack.back();
    stack.pop_back();
    std::string a = stack.back();
    const char *infix = nullptr;
    const char *call = nullptr;
    switch (term.op) {
    case ExprOp::Add:
      infix = " + ";
      break;
    case ExprOp::Sub:
      infix = " - ";
      break;
    case ExprOp::Mul:
      infix = "*";
      break;
    case ExprOp::Div:
      infix = "/";
      break;
    case ExprOp::CeilDiv:
      call = "ceil_div";
      break;
    case ExprOp::Min:
      call = "min";
      break;
    case ExprOp::Max:
      call = "max";
      break;
    default:
      return "<malformed>";
    }
    stack.back() = infix ? "(" + a + infix + b + ")"
                         : std::string(call) + "(" + a + ", " + b + ")";
  }
  if (stack.size() != 1)
    return "<malformed>";
  std::string s = stack.back();
  if (s.size() > 2 && s.front() == '(' && s.back() == ')' && terms.size() == 3)
    s = s.substr(1, s.size() - 2);
  return s;
}

//===----------------------------------------------------------------------===//
// Arguments, packing, programs
//===----------------------------------------------------------------------===//

LaunchArg LaunchArg::bufferAddress(uint32_t buffer, uint64_t offset) {
  LaunchArg arg;
  arg.kind = ArgKind::BufferAddress;
  arg.buffer = buffer;
  arg.offset = offset;
  return arg;
}

LaunchArg LaunchArg::int32(Expr expr) {
  LaunchArg arg;
  arg.kind = ArgKind::Int32;
  arg.expr = std::move(expr);
  return arg;
}

LaunchArg LaunchArg::int64(Expr expr) {
  LaunchArg arg;
  arg.kind = ArgKind::Int64;
  arg.expr = std::move(expr);
  return arg;
}

LaunchArg LaunchArg::float32(float value) {
  LaunchArg arg;
  arg.kind = ArgKind::Float32;
  arg.f32 = value;
  return arg;
}

uint64_t WeightPacker::add(const void *bytes, uint64_t size) {
  uint64_t offset =
      (data.size() + kWeightAlignment - 1) & ~(kWeightAlignment - 1);
  data.resize(offset, 0);
  const uint8_t *p = static_cast<const uint8_t *>(bytes);
  data.insert(data.end(), p, p + size);
  return offset;
}

int EngineContents::findProgram(const std::string &name) const {
  for (size_t i = 0; i < programs.size(); ++i)
    if (programs[i].name == name)
      return static_cast<int>(i);
  return -1;
}

const TextFile *
EngineContents::findTokenizerFile(const std::string &name) const {
  for (const TextFile &file : tokenizerFiles)
    if (file.name == name)
      return &file;
  return nullptr;
}

KVCacheConfig::QuantLayout KVCacheConfig::quantLayout(bool keys) const {
  QuantLayout q;
  auto product = [](std::initializer_list<uint64_t> dims, uint64_t *out) {
    uint64_t bytes = 1;
    for (uint64_t dim : dims)
      if (!checkedMul(bytes, dim, &bytes))
        return false;
    *out = bytes;
    return true;
  };
  auto align = [](uint64_t v) { return (v + 255) / 256 * 256; };
  uint64_t rowBytes = (uint64_t(headDim) * coldBits + 7) / 8;
  uint64_t seqHeads = uint64_t(maxBatch) * kvHeads;
  // Both buffers get the same slice (room for per-token and, with
  // per-channel keys, per-channel scales), so one offset addresses a layer.
  (void)keys;
  uint64_t groups = (headDim + groupSize - 1) / (groupSize ? groupSize : 1);
  uint64_t block = channelBlock ? channelBlock : 1;
  // The cold parts per sequence of the capacity, or (paged) per pool block
  // of blockTokens rows; the hot ring is per sequence either way.
  uint64_t units = paged() ? uint64_t(blocks) * kvHeads : seqHeads;
  uint64_t rows = paged() ? blockTokens : capacity;
  uint64_t scaleBlocks = (rows + block - 1) / block;
  uint64_t tokenScales = 0, channelScales = 0;
  if (!product({seqHeads, hotRows, headDim, dtypeBytes(dtype)}, &q.hotBytes) ||
      !product({units, rows, rowBytes}, &q.coldBytes) ||
      !product({units, rows, groups, 2}, &tokenScales) ||
      !product({units, scaleBlocks, headDim, 2}, &channelScales) ||
      (q.hotBytes | q.coldBytes | tokenScales | channelScales) >> 60)
    return QuantLayout();
  q.scaleBytes =
      perChannelKeys ? std::max(tokenScales, channelScales) : tokenScales;
  q.coldOffset = align(q.hotBytes);
  q.scaleOffset = q.coldOffset + align(q.coldBytes);
  q.layerBytes = q.scaleOffset + align(q.scaleBytes);
  return q;
}

double KVCacheConfig::bytesPerToken() const {
  double perHead = 2.0 * headDim * dtypeBytes(dtype);
  if (coldBits) {
    double row = headDim * coldBits / 8.0;
    double tokenScales = 2.0 * ((headDim + groupSize - 1) / groupSize);
    double keyScales =
        perChannelKeys ? 2.0 * headDim / channelBlock : tokenScales;
    perHead = 2 * row + tokenScales + keyScales;
  }
  return perHead * layers * kvHeads;
}

uint64_t KVCacheConfig::bufferBytes(bool keys) const {
  uint64_t bytes = dtypeBytes(dtype);
  if (coldBits) {
    if (!checkedMul(quantLayout(keys).layerBytes, layers, &bytes))
      return 0;
    return bytes;
  }
  // A paged pool holds `blocks` blocks of `blockTokens` rows per layer.
  const uint64_t sequences = paged() ? blocks : maxBatch;
  const uint64_t rows = paged() ? blockTokens : capacity;
  for (uint64_t dim : {uint64_t(layers), sequences, uint64_t(kvHeads), rows,
                       uint64_t(headDim)})
    if (!checkedMul(bytes, dim, &bytes))
      return 0; // 32-bit dims cannot overflow here in practice; 0 is invalid
  return bytes;
}

bool checkTargetSm(uint32_t targetSm, uint32_t deviceSm, bool havePtx,
                   bool *usePtx, std::string *error) {
  *usePtx = false;
  if (targetSm / 10 == deviceSm / 10 && deviceSm % 10 >= targetSm % 10)
    return true;
  if (havePtx && deviceSm > targetSm) {
    *usePtx = true;
    return true;
  }
  *error = "engine was compiled for sm_" + std::to_string(targetSm) +
           " but this GPU is sm_" + std::to_string(deviceSm) +
           (havePtx ? " (PTX JIT cannot target an older GPU)"
                    : " and the engine has no PTX to JIT-compile") +
           "; recompile the model with sitsc for this GPU";
  return false;
}

} // namespace format
} // namespace sits
