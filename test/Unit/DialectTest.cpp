//===- DialectTest.cpp - C++ API tests of the onnx/attn/kv dialects ------===//
#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/KV/IR/KVDialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/InitAll.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

class DialectTest : public ::testing::Test {
protected:
  DialectTest() {
    DialectRegistry registry;
    h20::registerAllDialects(registry);
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }
  MLIRContext ctx;
};

TEST_F(DialectTest, RegistersProjectDialects) {
  EXPECT_NE(ctx.getLoadedDialect("onnx"), nullptr);
  EXPECT_NE(ctx.getLoadedDialect("attn"), nullptr);
  EXPECT_NE(ctx.getLoadedDialect("kv"), nullptr);
}

TEST_F(DialectTest, CacheTypeAccessorsAndDynamicSeq) {
  auto layout = h20::kv::LayoutAttr::get(&ctx, {0, 1, 2, 3, 4}, 256, 0);
  auto cache = h20::kv::CacheType::get(
      &ctx, {8, 2, 32, ShapedType::kDynamic, 128}, BFloat16Type::get(&ctx),
      layout);
  EXPECT_EQ(cache.numLayers(), 8);
  EXPECT_EQ(cache.numHeads(), 32);
  EXPECT_TRUE(ShapedType::isDynamic(cache.seqLen()));
  EXPECT_EQ(cache.headDim(), 128);
  EXPECT_EQ(cache.getLayout().getAlign(), 256);
}

TEST_F(DialectTest, CacheTypeRejectsDynamicHeads) {
  std::string message;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    message = d.str();
    return success();
  });
  auto layout = h20::kv::LayoutAttr::get(&ctx, {0, 1, 2, 3, 4}, 256, 0);
  auto cache = h20::kv::CacheType::getChecked(
      [&] { return emitError(UnknownLoc::get(&ctx)); }, &ctx,
      {8, 2, ShapedType::kDynamic, 16, 128}, BFloat16Type::get(&ctx), layout);
  EXPECT_FALSE(cache);
  EXPECT_NE(message.find("kv_heads"), std::string::npos) << message;
}

TEST_F(DialectTest, AttentionVerifierChecksGqaGrouping) {
  // 8 query heads over 2 KV heads is a group of 4, not 3.
  const char *ir = R"mlir(
    func.func @f(%q: tensor<1x8x16x64xf32>, %k: tensor<1x2x16x64xf32>,
                 %v: tensor<1x2x16x64xf32>) -> tensor<1x8x16x64xf32> {
      %o = attn.attention %q, %k, %v {scale = 0.125 : f64, causal = true,
          kv_group = 3 : i64}
          : (tensor<1x8x16x64xf32>, tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32>)
          -> tensor<1x8x16x64xf32>
      return %o : tensor<1x8x16x64xf32>
    })mlir";
  std::string message;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    message = d.str();
    return success();
  });
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(ir, &ctx);
  EXPECT_FALSE(module);
  EXPECT_NE(message.find("kv_group (3)"), std::string::npos) << message;
}

TEST_F(DialectTest, OnnxArityIsChecked) {
  OpBuilder b(&ctx);
  auto loc = UnknownLoc::get(&ctx);
  auto module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module.getBody());
  auto t = RankedTensorType::get({4}, b.getF32Type());
  auto c = h20::onnx::ConstantOp::create(
      b, loc, TypeRange{t}, ValueRange{},
      DenseElementsAttr::get(t, ArrayRef<float>{1, 2, 3, 4}));
  // Add with one input must fail verification; with two it passes.
  auto bad = h20::onnx::AddOp::create(b, loc, TypeRange{t},
                                      ValueRange{c->getResult(0)});
  std::string message;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    message = d.str();
    return success();
  });
  EXPECT_TRUE(failed(verify(bad)));
  EXPECT_NE(message.find("expects 2 input(s), got 1"), std::string::npos)
      << message;
  bad->erase();
  auto good = h20::onnx::AddOp::create(
      b, loc, TypeRange{t}, ValueRange{c->getResult(0), c->getResult(0)});
  EXPECT_TRUE(succeeded(verify(good)));
  module->erase();
}

} // namespace
