"""make_range_cases.py OUT_DIR: small ONNX models whose index inputs must
lie in a range (ONNX: an out-of-range index is an error), and .npy inputs
inside and outside it, for index-ranges.test:
  gather.onnx       Gather(data [4, 3] initializer, indices [N] input), axis 0
  gather_dyn.onnx   Gather(data [M, 3] input, indices [N] input): the bound
                    is data's dim 0 at run time
  gather_elem.onnx  GatherElements(data [2, 5] input, indices [2, K] input), axis 1
  rope.onnx         RotaryEmbedding-23(x [1, 2, S, 8], cos/sin caches [16, 4]
                    initializers, position_ids [1, S] input)
  gather_const.onnx Gather with a constant index 7 into a dim of 4 (compile error)
  gather_elem_const.onnx GatherElements with a constant index -6 into a dim of 5
  gather_s.onnx, rope_s.onnx  gather and rope with static shapes (N = 3,
                    S = 3), which the GPU target also compiles
Needs the onnx and numpy packages."""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(name, nodes, inputs, outputs, inits=(), opset=23):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, ir_version=10, opset_imports=[helper.make_opsetid("", opset)])
    with open(os.path.join(out, name + ".onnx"), "wb") as f:
        f.write(m.SerializeToString())


def npy(name, a):
    np.save(os.path.join(out, name + ".npy"), a)


F, I = TensorProto.FLOAT, TensorProto.INT64
data = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "data")
save("gather", [helper.make_node("Gather", ["data", "i"], ["y"], name="embed", axis=0)],
     [helper.make_tensor_value_info("i", I, ["N"])],
     [helper.make_tensor_value_info("y", F, ["N", 3])], [data])
save("gather_dyn", [helper.make_node("Gather", ["d", "i"], ["y"], name="pick", axis=0)],
     [helper.make_tensor_value_info("d", F, ["M", 3]), helper.make_tensor_value_info("i", I, ["N"])],
     [helper.make_tensor_value_info("y", F, ["N", 3])])
save("gather_elem", [helper.make_node("GatherElements", ["d", "i"], ["y"], name="ge", axis=1)],
     [helper.make_tensor_value_info("d", F, [2, 5]), helper.make_tensor_value_info("i", I, [2, "K"])],
     [helper.make_tensor_value_info("y", F, [2, "K"])])
cos = numpy_helper.from_array(np.cos(np.arange(64, dtype=np.float32).reshape(16, 4) * 0.1), "cos")
sin = numpy_helper.from_array(np.sin(np.arange(64, dtype=np.float32).reshape(16, 4) * 0.1), "sin")
save("rope", [helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "position_ids"], ["y"],
                               name="rope", num_heads=2)],
     [helper.make_tensor_value_info("x", F, [1, 2, "S", 8]),
      helper.make_tensor_value_info("position_ids", I, [1, "S"])],
     [helper.make_tensor_value_info("y", F, [1, 2, "S", 8])], [cos, sin])
save("gather_s", [helper.make_node("Gather", ["data", "i"], ["y"], name="embed", axis=0)],
     [helper.make_tensor_value_info("i", I, [3])],
     [helper.make_tensor_value_info("y", F, [3, 3])], [data])
save("rope_s", [helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "position_ids"], ["y"],
                                 name="rope", num_heads=2)],
     [helper.make_tensor_value_info("x", F, [1, 2, 3, 8]),
      helper.make_tensor_value_info("position_ids", I, [1, 3])],
     [helper.make_tensor_value_info("y", F, [1, 2, 3, 8])], [cos, sin])
save("gather_const", [helper.make_node("Constant", [], ["c"], name="idx",
                                       value=numpy_helper.from_array(np.array([1, 7], np.int64))),
                      helper.make_node("Gather", ["data", "c"], ["y"], name="bad_gather", axis=0)],
     [], [helper.make_tensor_value_info("y", F, [2, 3])], [data])
save("gather_elem_const",
     [helper.make_node("Constant", [], ["c"], name="idx",
                       value=numpy_helper.from_array(np.array([[0, -6]], np.int64))),
      helper.make_node("GatherElements", ["d", "c"], ["y"], name="bad_ge", axis=1)],
     [helper.make_tensor_value_info("d", F, [1, 5])], [helper.make_tensor_value_info("y", F, [1, 2])])

npy("i_ok", np.array([0, 3, -4, -1], np.int64))
npy("i3_ok", np.array([0, 3, -4], np.int64))
npy("i_hi", np.array([0, 3, 4], np.int64))
npy("i_lo", np.array([-5, 0], np.int64))
npy("d3", np.ones((3, 3), np.float32))
npy("d5", np.ones((5, 3), np.float32))
npy("de", np.arange(10, dtype=np.float32).reshape(2, 5))
npy("ie_ok", np.array([[4, -5], [0, 1]], np.int64))
npy("ie_bad", np.array([[4, 0], [5, 1]], np.int64))
npy("x", np.ones((1, 2, 3, 8), np.float32))
npy("pos_ok", np.array([[0, 7, 15]], np.int64))
npy("pos_bad", np.array([[0, 16, 2]], np.int64))
npy("pos_neg", np.array([[0, -1, 2]], np.int64))
