//===- Codec.cpp - Binary encoding of the kernels, plan, tokenizer -------===//
//
// Layouts (all integers little-endian; str = u32 length + bytes; blob = u64
// length + bytes; expr = u32 term count + (u32 op, i64 value) per term):
//
//   kernels: u32 moduleCount, { str name, u32 sm, blob cubin, blob ptx }*,
//            u32 kernelCount, { u32 module, str function }*
//   plan:    u32 bufferCount, { str name, u32 role, u32 dtype, u64 offset,
//                               u64 bytes, u32 rank, u64 dim* }*,
//            u32 programCount, { str name, u32 launchCount,
//              { u32 kernel, expr grid[3], expr block[3], expr shared,
//                u32 argCount, { u32 kind, payload }* }* }*
//   payload: BufferAddress: u32 buffer, u64 offset; Int32/Int64: expr;
//            Float32: f32.
//   tokenizer: u32 fileCount, { str name, blob content }*
//
//===----------------------------------------------------------------------===//

#include "format/Codec.h"

#include <cctype>

namespace sits {
namespace format {

static void writeExpr(ByteWriter &w, const Expr &expr) {
  w.u32(static_cast<uint32_t>(expr.terms.size()));
  for (const ExprTerm &term : expr.terms) {
    w.u32(static_cast<uint32_t>(term.op));
    w.i64(term.value);
  }
}

static Expr readExpr(ByteReader &r) {
  Expr expr;
  uint32_t n = r.u32();
  if (n > kMaxExprOps) {
    r.fail("an expression has " + std::to_string(n) + " terms, more than " +
           std::to_string(kMaxExprOps));
    return expr;
  }
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    ExprTerm term;
    term.op = static_cast<ExprOp>(r.u32());
    term.value = r.i64();
    expr.terms.push_back(term);
  }
  return expr;
}

/// Reads a count and checks it against a limit and against the bytes left
/// (each element needs at least `minBytes`), so a hostile count cannot make
/// the reader reserve memory the section does not back.
static uint32_t readCount(ByteReader &r, uint32_t limit, uint64_t minBytes,
                          uint64_t sectionBytes, const char *what) {
  uint32_t n = r.u32();
  if (!r.ok())
    return 0;
  if (n > limit) {
    r.fail(std::string("the number of ") + what + " (" + std::to_string(n) +
           ") exceeds the limit of " + std::to_string(limit));
    return 0;
  }
  uint64_t needed;
  if (!checkedMul(n, minBytes, &needed) || needed > sectionBytes) {
    r.fail(std::string("the number of ") + what + " (" + std::to_string(n) +
           ") does not fit in its section");
    return 0;
  }
  return n;
}

std::vector<uint8_t> encodeKernels(const EngineContents &contents) {
  ByteWriter w;
  w.u32(static_cast<uint32_t>(contents.modules.size()));
  for (const ModuleImage &module : contents.modules) {
    w.str(module.name);
    w.u32(module.sm);
    w.blob(module.cubin.data(), module.cubin.size());
    w.blob(module.ptx.data(), module.ptx.size());
  }
  w.u32(static_cast<uint32_t>(contents.kernels.size()));
  for (const KernelRef &kernel : contents.kernels) {
    w.u32(kernel.module);
    w.str(kernel.function);
  }
  return std::move(w.bytes());
}

bool decodeKernels(const uint8_t *data, uint64_t size, EngineContents *contents,
                   std::string *error) {
  ByteReader r(data, size);
  uint32_t modules = readCount(r, kMaxModules, 24, size, "modules");
  for (uint32_t i = 0; i < modules && r.ok(); ++i) {
    ModuleImage module;
    module.name = r.str(kMaxNameBytes, "a module name");
    module.sm = r.u32();
    uint64_t length;
    const uint8_t *cubin = r.blob(&length, "a cubin");
    if (cubin)
      module.cubin.assign(cubin, cubin + length);
    const uint8_t *ptx = r.blob(&length, "a PTX image");
    if (ptx)
      module.ptx.assign(reinterpret_cast<const char *>(ptx), length);
    contents->modules.push_back(std::move(module));
  }
  uint32_t kernels = readCount(r, kMaxKernels, 8, size, "kernels");
  for (uint32_t i = 0; i < kernels && r.ok(); ++i) {
    KernelRef kernel;
    kernel.module = r.u32();
    kernel.function = r.str(kMaxNameBytes, "a kernel name");
    contents->kernels.push_back(std::move(kernel));
  }
  if (r.ok() && !r.atEnd())
    r.fail("unexpected bytes after the kernel table");
  if (!r.ok()) {
    *error = "kernels section: " + r.error();
    return false;
  }
  return true;
}

std::vector<uint8_t> encodePlan(const EngineContents &contents) {
  ByteWriter w;
  w.u32(static_cast<uint32_t>(contents.buffers.size()));
  for (const BufferDesc &buffer : contents.buffers) {
    w.str(buffer.name);
    w.u32(static_cast<uint32_t>(buffer.role));
    w.u32(static_cast<uint32_t>(buffer.dtype));
    w.u64(buffer.offset);
    w.u64(buffer.bytes);
    w.u32(static_cast<uint32_t>(buffer.shape.size()));
    for (uint64_t dim : buffer.shape)
      w.u64(dim);
  }
  w.u32(static_cast<uint32_t>(contents.programs.size()));
  for (const Program &program : contents.programs) {
    w.str(program.name);
    w.u32(static_cast<uint32_t>(program.launches.size()));
    for (const Launch &launch : program.launches) {
      w.u32(launch.kernel);
      for (const Expr &e : launch.grid)
        writeExpr(w, e);
      for (const Expr &e : launch.block)
        writeExpr(w, e);
      writeExpr(w, launch.sharedBytes);
      w.u32(static_cast<uint32_t>(launch.args.size()));
      for (const LaunchArg &arg : launch.args) {
        w.u32(static_cast<uint32_t>(arg.kind));
        switch (arg.kind) {
        case ArgKind::BufferAddress:
          w.u32(arg.buffer);
          w.u64(arg.offset);
          break;
        case ArgKind::Int32:
        case ArgKind::Int64:
          writeExpr(w, arg.expr);
          break;
        case ArgKind::Float32:
          w.f32(arg.f32);
          break;
        }
      }
    }
  }
  return std::move(w.bytes());
}

bool decodePlan(const uint8_t *data, uint64_t size, EngineContents *contents,
                std::string *error) {
  ByteReader r(data, size);
  uint32_t buffers = readCount(r, kMaxBuffers, 32, size, "buffers");
  for (uint32_t i = 0; i < buffers && r.ok(); ++i) {
    BufferDesc buffer;
    buffer.name = r.str(kMaxNameBytes, "a buffer name");
    buffer.role = static_cast<BufferRole>(r.u32());
    buffer.dtype = static_cast<DType>(r.u32());
    buffer.offset = r.u64();
    buffer.bytes = r.u64();
    uint32_t rank = r.u32();
    if (rank > kMaxRank)
      r.fail("buffer \"" + buffer.name + "\" has rank " + std::to_string(rank) +
             ", more than " + std::to_string(kMaxRank));
    for (uint32_t d = 0; d < rank && r.ok(); ++d)
      buffer.shape.push_back(r.u64());
    contents->buffers.push_back(std::move(buffer));
  }
  uint32_t programs = readCount(r, kMaxPrograms, 8, size, "programs");
  for (uint32_t p = 0; p < programs && r.ok(); ++p) {
    Program program;
    program.name = r.str(kMaxNameBytes, "a program name");
    uint32_t launches =
        readCount(r, kMaxLaunchesPerProgram, 36, size, "launches");
    for (uint32_t l = 0; l < launches && r.ok(); ++l) {
      Launch launch;
      launch.kernel = r.u32();
      for (Expr &e : launch.grid)
        e = readExpr(r);
      for (Expr &e : launch.block)
        e = readExpr(r);
      launch.sharedBytes = readExpr(r);
      uint32_t args = readCount(r, kMaxArgsPerLaunch, 8, size, "arguments");
      for (uint32_t a = 0; a < args && r.ok(); ++a) {
        LaunchArg arg;
        uint32_t kind = r.u32();
        arg.kind = static_cast<ArgKind>(kind);
        switch (arg.kind) {
        case ArgKind::BufferAddress:
          arg.buffer = r.u32();
          arg.offset = r.u64();
          break;
        case ArgKind::Int32:
        case ArgKind::Int64:
          arg.expr = readExpr(r);
          break;
        case ArgKind::Float32:
          arg.f32 = r.f32();
          break;
        default:
          r.fail("launch " + std::to_string(l) + " of program \"" +
                 program.name + "\" has an argument of unknown kind " +
                 std::to_string(kind));
        }
        launch.args.push_back(std::move(arg));
      }
      program.launches.push_back(std::move(launch));
    }
    contents->programs.push_back(std::move(program));
  }
  if (r.ok() && !r.atEnd())
    r.fail("unexpected bytes after the programs");
  if (!r.ok()) {
    *error = "plan section: " + r.error();
    return false;
  }
  return true;
}

std::vector<uint8_t> encodeTokenizer(const EngineContents &contents) {
  ByteWriter w;
  w.u32(static_cast<uint32_t>(contents.tokenizerFiles.size()));
  for (const TextFile &file : contents.tokenizerFiles) {
    w.str(file.name);
    w.blob(file.content.data(), file.content.size());
  }
  return std::move(w.bytes());
}

/// A tokenizer file name: a plain file name (letters, digits, `._-`), so
/// that a tool extracting the files can never write outside its folder.
static bool isPlainFileName(const std::string &name) {
  if (name.empty() || name == "." || name == "..")
    return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' &&
        c != '-')
      return false;
  return true;
}

bool decodeTokenizer(const uint8_t *data, uint64_t size,
                     EngineContents *contents, std::string *error) {
  ByteReader r(data, size);
  uint32_t files =
      readCount(r, kMaxTokenizerFiles, 12, size, "tokenizer files");
  for (uint32_t i = 0; i < files && r.ok(); ++i) {
    TextFile file;
    file.name = r.str(256, "a tokenizer file name");
    if (r.ok() && !isPlainFileName(file.name))
      r.fail("tokenizer file " + std::to_string(i) +
             " has a name that is not a plain file name");
    if (r.ok() && contents->findTokenizerFile(file.name))
      r.fail("tokenizer file \"" + file.name + "\" appears twice");
    uint64_t length = 0;
    const uint8_t *bytes = r.blob(&length, "a tokenizer file");
    if (r.ok() && length > kMaxTokenizerFileBytes)
      r.fail("tokenizer file \"" + file.name + "\" is " +
             std::to_string(length) + " bytes, more than the limit of " +
             std::to_string(kMaxTokenizerFileBytes));
    if (!r.ok())
      break;
    file.content.assign(reinterpret_cast<const char *>(bytes), length);
    contents->tokenizerFiles.push_back(std::move(file));
  }
  if (r.ok() && !r.atEnd())
    r.fail("unexpected bytes after the files");
  if (!r.ok()) {
    *error = "tokenizer section: " + r.error();
    return false;
  }
  return true;
}

} // namespace format
} // namespace sits
