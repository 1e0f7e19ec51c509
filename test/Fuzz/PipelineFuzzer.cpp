//===- PipelineFuzzer.cpp - libFuzzer target: import -> attn -> LLVM -----===//
//
// Structure-aware fuzzing of everything past the importer. Each input is a
// binary ONNX ModelProto; the custom mutator (below) parses it, changes the
// model the way a bad or unusual exporter would (an attribute's value or
// kind, a dim or dim_param, a constant's values or shape, an edge, a node
// dropped, duplicated or given another op type, a graph output, the opset)
// and serializes it again, so nearly every input is a model the importer
// accepts and the passes after it see.
//
// Per input, in a fresh MLIRContext set up as h20-opt sets it up
// (diagnostics collected by a handler, no op dumps, one thread):
//   1. importOnnxModelFromBuffer, RoutedExperts expanded (as for --target=cpu);
//   2. the attn pipeline (`h20-opt --emit=attn`: buildEmitPipeline "attn");
//   3. with option `plan`, on a clone: the planned passes for the cpu target
//      (`--emit=planned --target=cpu --max-seq=64`);
//   4. compileForCpu (`--target=cpu`, --cpu-opt-level=0, --logits=last with
//      option `logits=last`) down to LLVM IR in memory: h20-logits-last,
//      h20-lower-to-linalg, bufferization, the LLVM dialect conversions and
//      the translation to LLVM IR. LLVM's machine-code emission and the link
//      by `cc` are skipped (stopAtLLVMIR): they take 0.1-1 s per model (a
//      process per link) and are LLVM's code, not h20's.
// Options are read from the model's metadata_props entry "h20-fuzz" (a
// comma-separated list; the mutator toggles them).
//
// The contract: each stage succeeds, or fails having emitted at least one
// error diagnostic; never a crash, an abort, a sanitizer report or a hang
// (libFuzzer's -timeout). A failure without a diagnostic aborts.
//
// External data resolves beside the model path in a scratch directory
// holding a 16 MiB sparse data.bin (the seeds' big weights point into it),
// as in OnnxImportFuzzer.cpp. Nothing reads weight bytes on this path.
//
//===----------------------------------------------------------------------===//
#include "h20/Import/Onnx/OnnxImporter.h"
#include "h20/InitAll.h"
#include "h20/Pipelines/Pipelines.h"
#include "h20/Runtime/Format/Artifact.h"
#include "h20/Target/CpuTarget.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {
std::string modelPath, scratchDir;
mlir::DialectRegistry *registry;

void makeFile(const std::string &path, off_t bytes) {
  if (truncate(path.c_str(), 0) != 0)
    if (FILE *f = std::fopen(path.c_str(), "wb"))
      std::fclose(f);
  if (truncate(path.c_str(), bytes) != 0)
    std::abort();
}

constexpr const char *kOptionsKey = "h20-fuzz";

struct Options {
  bool logitsLast = false;
  bool plan = false;
};

Options readOptions(const uint8_t *data, size_t size) {
  Options o;
  onnx::ModelProto m;
  if (!m.ParseFromArray(data, static_cast<int>(size)))
    return o;
  for (const auto &p : m.metadata_props())
    if (p.key() == kOptionsKey) {
      o.logitsLast = p.value().find("logits=last") != std::string::npos;
      o.plan = p.value().find("plan") != std::string::npos;
    }
  return o;
}

[[noreturn]] void broken(const char *stage, const std::string &messages) {
  std::fprintf(stderr, "h20-fuzz-pipeline: %s failed without an error diagnostic\n%s", stage,
               messages.c_str());
  std::abort();
}
} // namespace

/// A context per input allocates a lot: no fill of new blocks, short malloc
/// stacks and a smaller quarantine make it about 2x faster (ASAN_OPTIONS
/// still overrides these).
extern "C" const char *__asan_default_options() {
  return "max_malloc_fill_size=0:malloc_context_size=8:quarantine_size_mb=32";
}

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  char dir[] = "/tmp/h20-fuzz-pipeline-XXXXXX";
  if (!mkdtemp(dir))
    std::abort();
  makeFile(std::string(dir) + "/data.bin", off_t(16) << 20);
  makeFile(std::string(dir) + "/w.bin", 64);
  modelPath = std::string(dir) + "/model.onnx";
  scratchDir = dir;
  std::atexit([] {
    unlink((scratchDir + "/data.bin").c_str());
    unlink((scratchDir + "/w.bin").c_str());
    rmdir(scratchDir.c_str());
  });
  registry = new mlir::DialectRegistry;
  h20::registerAllDialects(*registry);
  h20::registerAllPasses();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Options options = readOptions(data, size);
  mlir::MLIRContext ctx(*registry, mlir::MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  ctx.printOpOnDiagnostic(false);
  int errors = 0;
  std::string messages;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error)
      ++errors;
    llvm::raw_string_ostream os(messages);
    os << d.getLocation() << ": " << d << "\n";
    return mlir::success();
  });

  h20::OnnxImportOptions importOptions;
  importOptions.expandFunctions.push_back("RoutedExperts");
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      h20::importOnnxModelFromBuffer(bytes, modelPath, ctx, importOptions);
  if (!module) {
    if (!errors)
      broken("import", messages);
    return 0;
  }
  if (mlir::failed(mlir::verify(*module))) {
    std::fprintf(stderr, "imported module does not verify:\n%s", messages.c_str());
    std::abort();
  }

  int before = errors;
  mlir::PassManager attn(&ctx);
  if (mlir::failed(h20::buildEmitPipeline(attn, "attn")))
    std::abort();
  if (mlir::failed(attn.run(*module))) {
    if (errors == before)
      broken("the attn pipeline", messages);
    return 0;
  }

  if (options.plan) {
    mlir::OwningOpRef<mlir::ModuleOp> planned(mlir::cast<mlir::ModuleOp>((*module)->clone()));
    mlir::PassManager plan(&ctx);
    h20::buildPlanPipeline(plan, "cpu", /*maxSeq=*/64, /*kvElementBytes=*/0, 1);
    before = errors;
    if (mlir::failed(plan.run(*planned)) && errors == before)
      broken("the planned pipeline", messages);
  }

  h20::CpuTargetOptions cpu;
  cpu.logitsLast = options.logitsLast;
  cpu.optLevel = 0;
  cpu.stopAtLLVMIR = true;
  h20::runtime::Artifact artifact;
  before = errors;
  if (mlir::failed(h20::compileForCpu(*module, cpu, artifact)) && errors == before)
    broken("the CPU lowering", messages);
  return 0;
}

//===----------------------------------------------------------------------===//
// The mutator: one to three structural edits of the parsed ModelProto.
//===----------------------------------------------------------------------===//
namespace {

using Rng = std::mt19937_64;

size_t below(Rng &rng, size_t n) { return n ? rng() % n : 0; }
bool chance(Rng &rng, unsigned inN) { return below(rng, inN) == 0; }
template <typename T> const T &pickOf(Rng &rng, const std::vector<T> &v) {
  return v[below(rng, v.size())];
}

int64_t interestingInt(Rng &rng) {
  static const std::vector<int64_t> values = {
      0, 1, 2, 3, 4, -1, -2, -3, -4, 5, 7, 8, 16, 63, 64, 65, 128, 1024, -64,
      int64_t(1) << 31, -(int64_t(1) << 31), (int64_t(1) << 31) - 1, int64_t(1) << 40,
      std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
      std::numeric_limits<int64_t>::max() - 1, int64_t(1) << 62};
  return pickOf(rng, values);
}

int64_t smallOrInteresting(Rng &rng, int64_t around) {
  switch (below(rng, 4)) {
  case 0: // wrapping: the mutator itself must not overflow (UBSan)
    return int64_t(uint64_t(around) + 1);
  case 1:
    return int64_t(uint64_t(around) - 1);
  case 2:
    return int64_t(below(rng, 9)) - 4;
  default:
    return interestingInt(rng);
  }
}

float interestingFloat(Rng &rng) {
  static const std::vector<float> values = {
      0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 2.0f, 1e-6f, 1e-12f, 1e30f, -1e30f, 3.0f, 10000.0f,
      std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
      std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
      std::numeric_limits<float>::max(), 0.125f};
  return pickOf(rng, values);
}

std::string interestingString(Rng &rng) {
  static const std::vector<std::string> values = {
      "", "S", "batch", "seq", "N", "x", "constant", "none", "mean", "sum", "add", "mul", "max",
      "min", "left", "right", "NOTSET", "linear", "1", "-1", "axis", "\xff\xfe"};
  return pickOf(rng, values);
}

std::string attributeName(Rng &rng) {
  static const std::vector<std::string> values = {
      "axis", "axes", "perm", "keepdims", "to", "alpha", "beta", "epsilon", "stash_type",
      "is_causal", "scale", "softcap", "q_num_heads", "kv_num_heads", "num_heads",
      "interleaved", "rotary_embedding_dim", "value", "value_int", "value_ints",
      "value_float", "value_floats", "transA", "transB", "largest", "sorted", "split",
      "num_outputs", "upper", "exclusive", "reverse", "allowzero", "noop_with_empty_axes",
      "start", "end", "batch_dims", "reduction", "fmod", "qk_matmul_output_mode",
      "do_rotary", "local_window_size", "mode", "k", "saturate", "unidirectional"};
  return pickOf(rng, values);
}

std::string opType(Rng &rng) {
  static const std::vector<std::string> values = {
      "Abs", "Add", "And", "Attention", "Cast", "Concat", "Constant", "ConstantOfShape", "Cos",
      "CumSum", "Div", "Equal", "Erf", "Exp", "Expand", "Gather", "GatherND", "Gemm",
      "Greater", "GreaterOrEqual", "Identity", "IsNaN", "LayerNormalization", "Less",
      "LessOrEqual", "Log", "MatMul", "Max", "Min", "Mul", "Neg", "Not", "Or", "Pow",
      "RMSNormalization", "Range", "Reciprocal", "ReduceMax", "ReduceMean", "ReduceSum", "Relu",
      "Reshape", "RotaryEmbedding", "Shape", "Sigmoid", "Sin", "Slice", "Softmax", "Softplus",
      "Split", "Sqrt", "Squeeze", "Sub", "Sum", "Tanh", "Tile", "Transpose", "Trilu",
      "Unsqueeze", "Where", "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor", "Ceil",
      "Clip", "Floor", "GatherElements", "Mod", "Round", "ScatterElements", "Sign", "TopK",
      "SimplifiedLayerNormalization"};
  return pickOf(rng, values);
}

int32_t dataType(Rng &rng) {
  static const std::vector<int32_t> values = {
      onnx::TensorProto::FLOAT,   onnx::TensorProto::INT64,   onnx::TensorProto::INT32,
      onnx::TensorProto::BOOL,    onnx::TensorProto::FLOAT16, onnx::TensorProto::BFLOAT16,
      onnx::TensorProto::DOUBLE,  onnx::TensorProto::UINT8,   onnx::TensorProto::INT8,
      onnx::TensorProto::UNDEFINED, onnx::TensorProto::STRING};
  return pickOf(rng, values);
}

/// Every value name the graph defines, in order: inputs, initializers, then
/// node outputs up to (not including) node `upTo`.
std::vector<std::string> valuesBefore(const onnx::GraphProto &g, int upTo) {
  std::vector<std::string> names;
  for (const auto &v : g.input())
    names.push_back(v.name());
  for (const auto &t : g.initializer())
    names.push_back(t.name());
  for (int i = 0; i < upTo && i < g.node_size(); ++i)
    for (const auto &o : g.node(i).output())
      if (!o.empty())
        names.push_back(o);
  return names;
}

std::string freshName(Rng &rng, const onnx::GraphProto &g) {
  std::set<std::string> used;
  for (const std::string &n : valuesBefore(g, g.node_size()))
    used.insert(n);
  for (;;) {
    std::string n = "fz" + std::to_string(below(rng, 100000));
    if (!used.count(n))
      return n;
  }
}

int64_t elementCount(const onnx::TensorProto &t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || d > 4096)
      return -1;
    n *= d;
    if (n > 4096)
      return -1;
  }
  return n;
}

/// Rewrites a tensor's payload as `n` values in its typed field.
void fillTensor(Rng &rng, onnx::TensorProto &t, int64_t n) {
  t.clear_raw_data();
  t.clear_float_data();
  t.clear_int64_data();
  t.clear_int32_data();
  t.clear_double_data();
  t.clear_data_location();
  t.clear_external_data();
  int mode = below(rng, 3); // 0: one interesting value, 1: iota, 2: mixed
  int64_t fill = interestingInt(rng);
  float ffill = interestingFloat(rng);
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = mode == 0 ? fill : mode == 1 ? i : smallOrInteresting(rng, i);
    float f = mode == 0 ? ffill : mode == 1 ? float(i) : interestingFloat(rng);
    switch (t.data_type()) {
    case onnx::TensorProto::INT64:
      t.add_int64_data(v);
      break;
    case onnx::TensorProto::FLOAT:
      t.add_float_data(f);
      break;
    case onnx::TensorProto::DOUBLE:
      t.add_double_data(f);
      break;
    default:
      t.add_int32_data(int32_t(v));
      break;
    }
  }
}

void mutateTensor(Rng &rng, onnx::TensorProto &t) {
  switch (below(rng, 7)) {
  case 0: // a dim
    if (t.dims_size())
      t.set_dims(below(rng, t.dims_size()), chance(rng, 2) ? int64_t(below(rng, 5))
                                                           : smallOrInteresting(rng, 1));
    else
      t.add_dims(below(rng, 4));
    break;
  case 1: // rank
    if (t.dims_size() && chance(rng, 2))
      t.mutable_dims()->RemoveLast();
    else
      t.add_dims(below(rng, 4));
    break;
  case 2: // empty or scalar
    if (chance(rng, 2)) {
      t.clear_dims();
      t.add_dims(0);
    } else {
      t.clear_dims();
    }
    break;
  case 3: // data type
    t.set_data_type(dataType(rng));
    break;
  default: // values, sized to the dims (when they are small)
    break;
  }
  int64_t n = elementCount(t);
  if (n >= 0 && (chance(rng, 4) || t.data_location() != onnx::TensorProto::EXTERNAL))
    fillTensor(rng, t, chance(rng, 8) ? n + 1 : n);
}

void mutateAttribute(Rng &rng, onnx::NodeProto &node) {
  using A = onnx::AttributeProto;
  if (!node.attribute_size() || chance(rng, 5)) {
    A *a = node.add_attribute();
    a->set_name(attributeName(rng));
    switch (below(rng, 4)) {
    case 0:
      a->set_type(A::INT), a->set_i(smallOrInteresting(rng, 0));
      break;
    case 1:
      a->set_type(A::INTS);
      for (size_t i = 0, e = below(rng, 4); i < e; ++i)
        a->add_ints(smallOrInteresting(rng, 0));
      break;
    case 2:
      a->set_type(A::FLOAT), a->set_f(interestingFloat(rng));
      break;
    default:
      a->set_type(A::STRING), a->set_s(interestingString(rng));
      break;
    }
    // A name twice on one node is a separate (import-level) error: keep it rare.
    for (int i = 0; i + 1 < node.attribute_size(); ++i)
      if (node.attribute(i).name() == a->name() && !chance(rng, 8)) {
        node.mutable_attribute()->SwapElements(i, node.attribute_size() - 1);
        node.mutable_attribute()->RemoveLast();
        break;
      }
    return;
  }
  int index = below(rng, node.attribute_size());
  A &a = *node.mutable_attribute(index);
  if (chance(rng, 10)) { // drop it
    node.mutable_attribute()->SwapElements(index, node.attribute_size() - 1);
    node.mutable_attribute()->RemoveLast();
    return;
  }
  if (chance(rng, 8)) { // another kind, same name
    int64_t i = a.has_i() ? a.i() : a.ints_size() ? a.ints(0) : 1;
    float f = a.has_f() ? a.f() : 1.0f;
    a.clear_i(), a.clear_ints(), a.clear_f(), a.clear_floats(), a.clear_s(), a.clear_strings(),
        a.clear_t();
    switch (below(rng, 5)) {
    case 0:
      a.set_type(A::INT), a.set_i(i);
      break;
    case 1:
      a.set_type(A::INTS), a.add_ints(i);
      break;
    case 2:
      a.set_type(A::FLOAT), a.set_f(f);
      break;
    case 3:
      a.set_type(A::FLOATS), a.add_floats(f);
      break;
    default:
      a.set_type(A::STRING), a.set_s(std::to_string(i));
      break;
    }
    return;
  }
  switch (a.type()) {
  case A::INT:
    a.set_i(smallOrInteresting(rng, a.i()));
    break;
  case A::FLOAT:
    a.set_f(chance(rng, 2) ? interestingFloat(rng) : a.f() * 2);
    break;
  case A::STRING:
    a.set_s(interestingString(rng));
    break;
  case A::INTS:
    switch (below(rng, 4)) {
    case 0:
      if (a.ints_size()) {
        int j = below(rng, a.ints_size());
        a.set_ints(j, smallOrInteresting(rng, a.ints(j)));
        break;
      }
      [[fallthrough]];
    case 1:
      a.add_ints(smallOrInteresting(rng, a.ints_size()));
      break;
    case 2:
      if (a.ints_size())
        a.mutable_ints()->RemoveLast();
      break;
    default:
      if (a.ints_size() > 1)
        a.mutable_ints()->SwapElements(below(rng, a.ints_size()), below(rng, a.ints_size()));
      else
        a.clear_ints();
      break;
    }
    break;
  case A::FLOATS:
    if (a.floats_size() && chance(rng, 2))
      a.set_floats(below(rng, a.floats_size()), interestingFloat(rng));
    else if (chance(rng, 2))
      a.add_floats(interestingFloat(rng));
    else
      a.clear_floats();
    break;
  case A::TENSOR:
    mutateTensor(rng, *a.mutable_t());
    break;
  default:
    break;
  }
}

onnx::TypeProto_Tensor *pickTensorType(Rng &rng, onnx::GraphProto &g) {
  std::vector<onnx::ValueInfoProto *> infos;
  for (auto &v : *g.mutable_input())
    infos.push_back(&v);
  for (auto &v : *g.mutable_output())
    infos.push_back(&v);
  for (auto &v : *g.mutable_value_info())
    infos.push_back(&v);
  if (infos.empty())
    return nullptr;
  // Inputs first: they fix every shape after them.
  onnx::ValueInfoProto *v = g.input_size() && chance(rng, 2) ? g.mutable_input(below(rng, g.input_size()))
                                                           : pickOf(rng, infos);
  if (!v->type().has_tensor_type() && !chance(rng, 4))
    return nullptr;
  return v->mutable_type()->mutable_tensor_type();
}

void mutateDims(Rng &rng, onnx::GraphProto &g) {
  onnx::TypeProto_Tensor *t = pickTensorType(rng, g);
  if (!t)
    return;
  auto *shape = t->mutable_shape();
  switch (below(rng, 6)) {
  case 0:
  case 1:
    if (shape->dim_size()) {
      auto *d = shape->mutable_dim(below(rng, shape->dim_size()));
      if (chance(rng, 3))
        d->set_dim_value(smallOrInteresting(rng, d->dim_value()));
      else
        d->set_dim_value(int64_t(below(rng, 9)));
      break;
    }
    [[fallthrough]];
  case 2: {
    auto *d = shape->add_dim();
    if (chance(rng, 2))
      d->set_dim_value(below(rng, 4) + 1);
    else
      d->set_dim_param(interestingString(rng));
    if (shape->dim_size() > 1 && chance(rng, 2)) // somewhere other than last
      shape->mutable_dim()->SwapElements(below(rng, shape->dim_size()), shape->dim_size() - 1);
    break;
  }
  case 3:
    if (shape->dim_size()) {
      auto *d = shape->mutable_dim(below(rng, shape->dim_size()));
      if (chance(rng, 4))
        d->Clear(); // neither value nor param
      else
        d->set_dim_param(interestingString(rng));
    }
    break;
  case 4:
    if (shape->dim_size())
      shape->mutable_dim()->RemoveLast();
    else
      t->clear_shape();
    break;
  default:
    t->set_elem_type(dataType(rng));
    break;
  }
}

void rewire(Rng &rng, onnx::GraphProto &g) {
  if (!g.node_size())
    return;
  int n = below(rng, g.node_size());
  onnx::NodeProto &node = *g.mutable_node(n);
  std::vector<std::string> names = valuesBefore(g, chance(rng, 10) ? g.node_size() : n);
  if (names.empty())
    return;
  switch (below(rng, 6)) {
  case 0:
    node.add_input(pickOf(rng, names));
    break;
  case 1:
    if (node.input_size())
      node.mutable_input()->RemoveLast();
    break;
  case 2:
    if (node.input_size()) {
      node.set_input(below(rng, node.input_size()), "");
      break;
    }
    [[fallthrough]];
  default:
    if (node.input_size())
      node.set_input(below(rng, node.input_size()), pickOf(rng, names));
    else
      node.add_input(pickOf(rng, names));
    break;
  }
}

void mutateNode(Rng &rng, onnx::GraphProto &g) {
  if (!g.node_size())
    return;
  int n = below(rng, g.node_size());
  switch (below(rng, 5)) {
  case 0: { // duplicate it, fresh outputs, one later use moved over
    onnx::NodeProto copy = g.node(n);
    copy.set_name(copy.name() + "_dup");
    std::string firstOut;
    for (int i = 0; i < copy.output_size(); ++i)
      if (!copy.output(i).empty()) {
        copy.set_output(i, freshName(rng, g));
        if (firstOut.empty())
          firstOut = copy.output(i);
      }
    std::string oldOut = g.node(n).output_size() ? g.node(n).output(0) : "";
    g.add_node()->Swap(&copy);
    for (int i = g.node_size() - 1; i > n + 1; --i)
      g.mutable_node()->SwapElements(i, i - 1);
    if (!firstOut.empty() && !oldOut.empty())
      for (int i = n + 2; i < g.node_size(); ++i) {
        auto *in = g.mutable_node(i)->mutable_input();
        bool moved = false;
        for (auto &name : *in)
          if (name == oldOut && chance(rng, 2)) {
            name = firstOut;
            moved = true;
            break;
          }
        if (moved)
          break;
      }
    break;
  }
  case 1: { // drop it: its uses take its first input (or any earlier value)
    onnx::NodeProto dropped = g.node(n);
    g.mutable_node()->DeleteSubrange(n, 1);
    std::vector<std::string> names = valuesBefore(g, n);
    std::string with = dropped.input_size() && !dropped.input(0).empty() ? dropped.input(0)
                       : names.empty()                                   ? ""
                                                                         : pickOf(rng, names);
    for (const auto &out : dropped.output()) {
      if (out.empty())
        continue;
      for (auto &node : *g.mutable_node())
        for (auto &name : *node.mutable_input())
          if (name == out)
            name = with;
      for (auto &o : *g.mutable_output())
        if (o.name() == out)
          o.set_name(with);
    }
    break;
  }
  case 2: // another op type, same inputs and attributes
    g.mutable_node(n)->set_op_type(opType(rng));
    if (chance(rng, 8))
      g.mutable_node(n)->set_domain(chance(rng, 2) ? "com.microsoft" : "");
    break;
  case 3: { // one more or one fewer output
    auto *node = g.mutable_node(n);
    if (node->output_size() > 1 && chance(rng, 2))
      node->mutable_output()->RemoveLast();
    else
      node->add_output(chance(rng, 4) ? "" : freshName(rng, g));
    break;
  }
  default: // swap with the next node (order is not topological any more)
    if (n + 1 < g.node_size() && chance(rng, 3))
      g.mutable_node()->SwapElements(n, n + 1);
    else
      mutateAttribute(rng, *g.mutable_node(n));
    break;
  }
}

void mutateConstant(Rng &rng, onnx::GraphProto &g) {
  std::vector<onnx::TensorProto *> tensors;
  for (auto &node : *g.mutable_node())
    for (auto &a : *node.mutable_attribute())
      if (a.has_t())
        tensors.push_back(a.mutable_t());
  for (auto &t : *g.mutable_initializer())
    tensors.push_back(&t);
  if (tensors.empty()) {
    // Make one: a Constant feeding some node's input.
    std::vector<std::string> names;
    if (!g.node_size())
      return;
    onnx::NodeProto c;
    c.set_op_type("Constant");
    c.set_name("fz_const");
    c.add_output(freshName(rng, g));
    auto *a = c.add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(chance(rng, 2) ? onnx::TensorProto::INT64
                                                 : onnx::TensorProto::FLOAT);
    a->mutable_t()->add_dims(below(rng, 4));
    fillTensor(rng, *a->mutable_t(), elementCount(a->t()));
    int n = below(rng, g.node_size());
    auto *user = g.mutable_node(n);
    if (user->input_size())
      user->set_input(below(rng, user->input_size()), c.output(0));
    g.add_node()->Swap(&c);
    for (int i = g.node_size() - 1; i > 0; --i)
      g.mutable_node()->SwapElements(i, i - 1);
    return;
  }
  mutateTensor(rng, *pickOf(rng, tensors));
}

void mutateOutputs(Rng &rng, onnx::GraphProto &g) {
  std::vector<std::string> names = valuesBefore(g, g.node_size());
  if (g.output_size() > 1 && chance(rng, 2)) {
    g.mutable_output()->SwapElements(below(rng, g.output_size()), g.output_size() - 1);
    g.mutable_output()->RemoveLast();
  } else if (!names.empty()) {
    auto *o = g.add_output();
    o->set_name(pickOf(rng, names));
    // Type taken from a value_info or input of that name, if any.
    for (const auto &v : g.value_info())
      if (v.name() == o->name())
        *o->mutable_type() = v.type();
    for (const auto &v : g.input())
      if (v.name() == o->name())
        *o->mutable_type() = v.type();
  }
}

void mutateModel(Rng &rng, onnx::ModelProto &m) {
  onnx::GraphProto &g = *m.mutable_graph();
  switch (below(rng, 16)) {
  case 0:
  case 1:
  case 2:
  case 3:
    if (g.node_size())
      mutateAttribute(rng, *g.mutable_node(below(rng, g.node_size())));
    break;
  case 4:
  case 5:
  case 6:
    mutateDims(rng, g);
    break;
  case 7:
  case 8:
  case 9:
    mutateConstant(rng, g);
    break;
  case 10:
  case 11:
    rewire(rng, g);
    break;
  case 12:
  case 13:
    mutateNode(rng, g);
    break;
  case 14:
    mutateOutputs(rng, g);
    break;
  default:
    if (chance(rng, 2)) { // options of the target
      static const std::vector<std::string> values = {"", "logits=last", "plan",
                                                      "logits=last,plan"};
      onnx::StringStringEntryProto *entry = nullptr;
      for (auto &p : *m.mutable_metadata_props())
        if (p.key() == kOptionsKey)
          entry = &p;
      if (!entry) {
        entry = m.add_metadata_props();
        entry->set_key(kOptionsKey);
      }
      entry->set_value(pickOf(rng, values));
    } else { // the default domain's opset
      for (auto &o : *m.mutable_opset_import())
        if (o.domain().empty() || o.domain() == "ai.onnx")
          o.set_version(chance(rng, 4) ? smallOrInteresting(rng, o.version())
                                       : 17 + int64_t(below(rng, 9)));
    }
    break;
  }
}

} // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t maxSize,
                                          unsigned int seed) {
  Rng rng(seed);
  onnx::ModelProto m;
  // Byte-level now and then (and for whatever is not a model): the wire
  // format's own corner cases, mostly the importer's (onnx-import target).
  if (chance(rng, 32) || !m.ParseFromArray(data, static_cast<int>(size)) || !m.has_graph())
    return LLVMFuzzerMutate(data, size, maxSize);
  for (size_t i = 0, e = 1 + below(rng, 3); i < e; ++i)
    mutateModel(rng, m);
  std::string out;
  if (!m.SerializeToString(&out) || out.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

/// Crossover: one node of the other model (its attributes, op type and
/// domain), appended to this one with inputs drawn from this model's values
/// and its first output made a graph output.
extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t *data1, size_t size1,
                                            const uint8_t *data2, size_t size2, uint8_t *out,
                                            size_t maxOutSize, unsigned int seed) {
  Rng rng(seed);
  onnx::ModelProto a, b;
  if (!a.ParseFromArray(data1, static_cast<int>(size1)) ||
      !b.ParseFromArray(data2, static_cast<int>(size2)) || !a.has_graph() ||
      !b.graph().node_size())
    return 0;
  onnx::GraphProto &g = *a.mutable_graph();
  std::vector<std::string> names = valuesBefore(g, g.node_size());
  if (names.empty())
    return 0;
  onnx::NodeProto node = b.graph().node(below(rng, b.graph().node_size()));
  node.set_name(node.name() + "_x");
  for (auto &in : *node.mutable_input())
    if (!in.empty())
      in = pickOf(rng, names);
  for (auto &o : *node.mutable_output())
    if (!o.empty())
      o = freshName(rng, g);
  std::string first = node.output_size() ? node.output(0) : "";
  g.add_node()->Swap(&node);
  if (!first.empty())
    g.add_output()->set_name(first);
  std::string bytes;
  if (!a.SerializeToString(&bytes) || bytes.size() > maxOutSize)
    return 0;
  std::memcpy(out, bytes.data(), bytes.size());
  return bytes.size();
}
