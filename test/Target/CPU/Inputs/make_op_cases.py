"""make_op_cases.py OUT_DIR [CASE ...]: small ONNX models of the ops h20
added for DeepSeek-V4.1 (TopK, GatherElements, ScatterElements, Mod, the
Bitwise ops, Round/Floor/Ceil/Sign/Clip, Split, model-local functions), each
written like an ONNX backend-test case: OUT_DIR/<case>/model.onnx and
test_data_set_0/input_J.pb, output_J.pb. The reference outputs are computed
here with numpy (or plain Python integers), independently of h20 and of
ONNX's own reference implementation. Without CASE names, every case is
written. Needs the onnx and numpy packages."""
import os
import sys

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

OPSET = 23
NP_TO_ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
              np.dtype(np.int32): TensorProto.INT32}


def const(name, array):
    return helper.make_node("Constant", [], [name], name=name, value=numpy_helper.from_array(array))


def i64(*values):
    """int64 array of the values, or of one nested list."""
    if len(values) == 1 and isinstance(values[0], list):
        values = values[0]
    return np.array(values, dtype=np.int64)


def f32(values):
    return np.array(values, dtype=np.float32)


class Case:
    """One model: nodes, graph inputs and outputs as (name, array, dims)
    with dims None (the array's shape) or a list mixing ints and dim_param
    names; the arrays are the test data and the numpy references."""

    def __init__(self, nodes, inputs, outputs, functions=(), opsets=()):
        self.nodes, self.inputs, self.outputs = nodes, inputs, outputs
        self.functions, self.opsets = list(functions), [("", OPSET)] + list(opsets)

    def write(self, out_dir, name):
        def info(n, a, dims):
            return helper.make_tensor_value_info(n, NP_TO_ONNX[a.dtype],
                                                 list(a.shape) if dims is None else dims)
        graph = helper.make_graph(self.nodes, name, [info(*x) for x in self.inputs],
                                  [info(*x) for x in self.outputs])
        model = helper.make_model(graph, ir_version=10, producer_name="make_op_cases.py",
                                  opset_imports=[helper.make_opsetid(d, v) for d, v in self.opsets])
        model.functions.extend(self.functions)
        data = os.path.join(out_dir, name, "test_data_set_0")
        os.makedirs(data, exist_ok=True)
        with open(os.path.join(out_dir, name, "model.onnx"), "wb") as f:
            f.write(model.SerializeToString())
        for kind, values in (("input", self.inputs), ("output", self.outputs)):
            for j, (n, a, _) in enumerate(values):
                with open(os.path.join(data, "%s_%d.pb" % (kind, j)), "wb") as f:
                    f.write(numpy_helper.from_array(a, n).SerializeToString())


# --- numpy references ------------------------------------------------------

def topk_ref(x, k, axis=-1, largest=True):
    # A stable sort keeps equal values in index order: ONNX's tie rule.
    order = np.argsort(-x if largest else x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)


def gather_elements_ref(data, ind, axis):
    out = np.zeros(ind.shape, dtype=data.dtype)
    for pos in np.ndindex(*ind.shape):
        source = list(pos)
        i = int(ind[pos])
        source[axis] = i + data.shape[axis] if i < 0 else i
        out[pos] = data[tuple(source)]
    return out


def scatter_elements_ref(data, ind, upd, axis, reduction="none"):
    out = data.copy()
    combine = {"none": lambda o, u: u, "add": lambda o, u: o + u, "mul": lambda o, u: o * u,
               "max": max, "min": min}[reduction]
    for pos in np.ndindex(*ind.shape):  # row-major, as the spec's loop
        target = list(pos)
        i = int(ind[pos])
        target[axis] = i + data.shape[axis] if i < 0 else i
        out[tuple(target)] = combine(out[tuple(target)], upd[pos])
    return out


def int_mod_ref(a, b, fmod):
    """Python integers: % has the divisor's sign (fmod = 0); the truncated
    remainder has the dividend's (fmod = 1); a remainder by 0 is 0."""
    a, b = np.broadcast_arrays(a, b)
    out = np.zeros(a.shape, dtype=a.dtype)
    for pos in np.ndindex(*a.shape):
        x, y = int(a[pos]), int(b[pos])
        if y == 0:
            r = 0
        elif fmod:
            q = abs(x) // abs(y)
            r = x - y * (q if (x < 0) == (y < 0) else -q)
        else:
            r = x % y
        out[pos] = r
    return out


# --- cases -----------------------------------------------------------------

def topk_ties():
    # Ties straddle the K-th place; largest along the last axis.
    x = f32([[1, 5, 3, 5, 2, 0, 9, 9], [0, 0, 0, 0, 0, 0, 0, 0], [-1, -2, -3, 4, 4, 4, -5, 6]])
    v, i = topk_ref(x, 3)
    return Case([const("k", i64(3)),
                 helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk", axis=-1)],
                [("x", x, None)], [("v", v, None), ("i", i, None)])


def topk_smallest_axis0_int64():
    x = np.array([[4, 1, 7], [2, 1, 7], [4, 0, -3], [2, 5, 7], [-8, 1, 0]], dtype=np.int64)
    v, i = topk_ref(x, 2, axis=0, largest=False)
    return Case([const("k", i64(2)),
                 helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk", axis=0,
                                  largest=0, sorted=1)],
                [("x", x, None)], [("v", v, None), ("i", i, None)])


def topk_middle_axis_unsorted():
    # axis -2 of a 3-D tensor; sorted = 0 (h20 still returns them sorted,
    # which ONNX allows, so the sorted reference applies).
    x = np.round(np.random.default_rng(1).normal(size=(2, 5, 3)), 1).astype(np.float32)
    x[0, 1, 0] = x[0, 3, 0]
    v, i = topk_ref(x, 4, axis=1)
    return Case([const("k", i64(4)),
                 helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk", axis=-2, sorted=0)],
                [("x", x, None)], [("v", v, None), ("i", i, None)])


def topk_k_from_input_dim():
    # K computed at run time: the length of a second input (Shape), so the
    # outputs' K dim is that input's dim.
    x = f32([[3, 1, 4, 1, 5, 9, 2], [6, 5, 3, 5, 8, 9, 7]])
    ref = np.zeros(3, dtype=np.float32)
    v, i = topk_ref(x, 3)
    return Case([helper.make_node("Shape", ["ref"], ["k"], name="k"),
                 helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk")],
                [("x", x, [2, "N"]), ("ref", ref, ["K"])],
                [("v", v, [2, "K"]), ("i", i, [2, "K"])])


def topk_k_min(n):
    # K = Min(4, N) with N the dynamic last dim (the exporter's guard for
    # short inputs); the data-dependent K dim is summed away.
    def make():
        rng = np.random.default_rng(n)
        x = rng.integers(-3, 4, size=(2, n)).astype(np.float32)
        v, i = topk_ref(x, min(4, n))
        return Case([const("four", i64(4)), const("axes", i64(1)),
                     helper.make_node("Shape", ["x"], ["n"], name="n", start=1, end=2),
                     helper.make_node("Min", ["four", "n"], ["k"], name="k"),
                     helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk"),
                     helper.make_node("Cast", ["i"], ["fi"], name="fi", to=TensorProto.FLOAT),
                     helper.make_node("ReduceSum", ["v", "axes"], ["vsum"], name="vsum", keepdims=0),
                     helper.make_node("ReduceSum", ["fi", "axes"], ["isum"], name="isum", keepdims=0)],
                    [("x", x, [2, "N"])],
                    [("vsum", v.sum(axis=1), None),
                     ("isum", i.astype(np.float32).sum(axis=1), None)])
    return make


def gather_elements_negative():
    data = np.arange(12, dtype=np.float32).reshape(3, 4) * 1.5
    ind = i64([[0, -1], [3, -4], [-2, 2]])
    return Case([helper.make_node("GatherElements", ["data", "ind"], ["y"], name="ge", axis=1)],
                [("data", data, None), ("ind", ind, None)],
                [("y", gather_elements_ref(data, ind, 1), None)])


def gather_elements_axis0_int32():
    # Negative axis (-2 of rank 2), int32 indices, fewer columns than data.
    data = np.arange(12, dtype=np.int64).reshape(4, 3) - 5
    ind = np.array([[3, 0], [-1, -4]], dtype=np.int32)
    return Case([helper.make_node("GatherElements", ["data", "ind"], ["y"], name="ge", axis=-2)],
                [("data", data, None), ("ind", ind, None)],
                [("y", gather_elements_ref(data, ind, 0), None)])


def scatter_elements_none():
    data = np.zeros((3, 5), dtype=np.float32)
    ind = i64([[0, -1], [2, -3], [-5, 3]])
    upd = f32([[1, 2], [3, 4], [5, 6]])
    return Case([helper.make_node("ScatterElements", ["data", "ind", "upd"], ["y"], name="se",
                                  axis=1)],
                [("data", data, None), ("ind", ind, None), ("upd", upd, None)],
                [("y", scatter_elements_ref(data, ind, upd, 1), None)])


def scatter_elements_add_axis0():
    # Repeated indices accumulate with reduction "add"; negative axis.
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    ind = i64([[1, 0, -1], [1, 3, 3]])
    upd = f32([[10, 20, 30], [100, 200, 300]])
    return Case([helper.make_node("ScatterElements", ["data", "ind", "upd"], ["y"], name="se",
                                  axis=-2, reduction="add")],
                [("data", data, None), ("ind", ind, None), ("upd", upd, None)],
                [("y", scatter_elements_ref(data, ind, upd, 0, "add"), None)])


def scatter_elements_max_int64():
    data = i64(5, -5, 0, 7).reshape(1, 4)
    ind = i64(0, 1, 1, -1).reshape(1, 4)
    upd = i64(3, -9, 2, 8).reshape(1, 4)
    return Case([helper.make_node("ScatterElements", ["data", "ind", "upd"], ["y"], name="se",
                                  axis=1, reduction="max")],
                [("data", data, None), ("ind", ind, None), ("upd", upd, None)],
                [("y", scatter_elements_ref(data, ind, upd, 1, "max"), None)])


def mod_int64():
    # Every sign combination, broadcasting, a divisor of 0 and INT64_MIN % -1.
    a = i64(7, -7, 7, -7, 0, 5, -6, -2**63, 2**40 + 3).reshape(9, 1)
    b = i64(3, -3, 1, 0, -1).reshape(1, 5)
    return Case([helper.make_node("Mod", ["a", "b"], ["m"], name="mod"),
                 helper.make_node("Mod", ["a", "b"], ["f"], name="fmod", fmod=1)],
                [("a", a, None), ("b", b, None)],
                [("m", int_mod_ref(a, b, False), None), ("f", int_mod_ref(a, b, True), None)])


def mod_int32_and_float():
    a = np.array([9, -9, 10, -10], dtype=np.int32)
    b = np.array([4, 4, -4, -4], dtype=np.int32)
    x = f32([5.5, -5.5, 5.5, -5.5, 1.0])
    y = f32([2.0, 2.0, -2.0, -2.0, 0.25])
    return Case([helper.make_node("Mod", ["a", "b"], ["m"], name="mod"),
                 helper.make_node("Mod", ["x", "y"], ["f"], name="fmod", fmod=1)],
                [("a", a, None), ("b", b, None), ("x", x, None), ("y", y, None)],
                [("m", int_mod_ref(a, b, False), None), ("f", np.fmod(x, y), None)])


def bitwise():
    a = i64(0, -1, 12, -12, 2**40 + 5, 255).reshape(2, 3)
    b = i64(5, -6, 10).reshape(1, 3)
    c = np.array([0x0f0f, -1, 3, -2**31], dtype=np.int32)
    d = np.array([0x00ff, 12, 5, -1], dtype=np.int32)
    return Case([helper.make_node("BitwiseAnd", ["a", "b"], ["and"], name="and"),
                 helper.make_node("BitwiseOr", ["a", "b"], ["or"], name="or"),
                 helper.make_node("BitwiseXor", ["a", "b"], ["xor"], name="xor"),
                 helper.make_node("BitwiseNot", ["a"], ["not"], name="not"),
                 helper.make_node("BitwiseXor", ["c", "d"], ["xor32"], name="xor32"),
                 helper.make_node("BitwiseNot", ["c"], ["not32"], name="not32")],
                [("a", a, None), ("b", b, None), ("c", c, None), ("d", d, None)],
                [("and", a & b, None), ("or", a | b, None), ("xor", a ^ b, None), ("not", ~a, None),
                 ("xor32", c ^ d, None), ("not32", ~c, None)])


def rounding():
    # Halves go to the even neighbour; signed zeros and infinities stay.
    x = f32([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 2.3, -2.7, 0.0, -0.0, 7.0,
             np.inf, -np.inf, 1e10 + 0.5, -3.2])
    n = np.array([-4, 0, 9], dtype=np.int64)
    return Case([helper.make_node("Round", ["x"], ["round"], name="round"),
                 helper.make_node("Floor", ["x"], ["floor"], name="floor"),
                 helper.make_node("Ceil", ["x"], ["ceil"], name="ceil"),
                 helper.make_node("Sign", ["x"], ["sign"], name="sign"),
                 helper.make_node("Sign", ["n"], ["nsign"], name="nsign")],
                [("x", x, None), ("n", n, None)],
                [("round", np.round(x), None), ("floor", np.floor(x), None),
                 ("ceil", np.ceil(x), None), ("sign", np.sign(x), None),
                 ("nsign", np.sign(n), None)])


def clip():
    # Both bounds; only max (min omitted by an empty name); only min (max
    # absent); min > max (every element becomes max); int64 bounds.
    x = f32([[-3, -1, 0, 0.5], [2, 4, 6, 8]])
    n = i64(-9, -2, 0, 3, 12)
    return Case([const("lo", np.array(-1.0, dtype=np.float32)),
                 const("hi", np.array(5.0, dtype=np.float32)),
                 const("nlo", i64(-2)), const("nhi", np.array(3, dtype=np.int64)),
                 helper.make_node("Clip", ["x", "lo", "hi"], ["both"], name="both"),
                 helper.make_node("Clip", ["x", "", "hi"], ["maxonly"], name="maxonly"),
                 helper.make_node("Clip", ["x", "lo"], ["minonly"], name="minonly"),
                 helper.make_node("Clip", ["x", "hi", "lo"], ["crossed"], name="crossed"),
                 helper.make_node("Clip", ["n", "nlo", "nhi"], ["ints"], name="ints")],
                [("x", x, None), ("n", n, None)],
                [("both", np.minimum(np.maximum(x, -1), 5), None),
                 ("maxonly", np.minimum(x, 5), None), ("minonly", np.maximum(x, -1), None),
                 ("crossed", np.full_like(x, -1), None),
                 ("ints", np.minimum(np.maximum(n, -2), 3), None)])


def split_sizes():
    # Split-18 by a `split` input along a dynamic-length axis 1.
    x = np.arange(14, dtype=np.float32).reshape(2, 7)
    return Case([const("sizes", i64(2, 5)),
                 helper.make_node("Split", ["x", "sizes"], ["a", "b"], name="split", axis=-1)],
                [("x", x, [2, "N"])], [("a", x[:, :2], [2, 2]), ("b", x[:, 2:], [2, 5])])


def split_uneven():
    # num_outputs = 3 over 7 rows: ceil(7 / 3) = 3, 3, then the last 1.
    x = np.arange(21, dtype=np.int64).reshape(7, 3)
    return Case([helper.make_node("Split", ["x"], ["a", "b", "c"], name="split", num_outputs=3)],
                [("x", x, None)], [("a", x[:3], None), ("b", x[3:6], None), ("c", x[6:], None)])


def ref_attr(name, ref, kind):
    a = AttributeProto()
    a.name, a.ref_attr_name, a.type = name, ref, kind
    return a


def with_defaults(fn, defaults):
    """fn plus FunctionProto.attribute_proto (field 11, IR 9), appended as
    raw protobuf fields: the onnx package here (1.12) predates the field."""
    raw = fn.SerializeToString()
    for a in defaults:
        body = a.SerializeToString()
        length, size = b"", len(body)
        while True:
            length += bytes([(size & 0x7f) | (0x80 if size > 0x7f else 0)])
            size >>= 7
            if not size:
                break
        raw += b"\x5a" + length + body  # tag: field 11, length-delimited
    out = onnx.FunctionProto()
    out.ParseFromString(raw)
    return out


def functions():
    """ai.h20.ScaledTopK(x, k) <scale (default 2.0), largest> multiplies by
    scale and calls ai.h20.TopKLast(y, k) <largest>, another local function;
    ai.h20.ClipOpt(x, lo, hi) is called with lo omitted. The body value
    names (s, y) also name a graph value, and ScaledTopK is called twice."""
    opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid("ai.h20", 1)]
    topk_node = helper.make_node("TopK", ["y", "k"], ["v", "i"], name="topk", axis=-1)
    topk_node.attribute.append(ref_attr("largest", "largest", AttributeProto.INT))
    topk_last = helper.make_function("ai.h20", "TopKLast", ["y", "k"], ["v", "i"], [topk_node],
                                     opsets, ["largest"])
    scale_node = helper.make_node("Constant", [], ["s"], name="scale")
    scale_node.attribute.append(ref_attr("value_float", "scale", AttributeProto.FLOAT))
    call_node = helper.make_node("TopKLast", ["y", "k"], ["v", "i"], name="inner",
                                 domain="ai.h20")
    call_node.attribute.append(ref_attr("largest", "largest", AttributeProto.INT))
    scaled = helper.make_function(
        "ai.h20", "ScaledTopK", ["x", "k"], ["v", "i"],
        [scale_node, helper.make_node("Mul", ["x", "s"], ["y"], name="mul"), call_node],
        opsets, ["largest"])
    scaled = with_defaults(scaled, [helper.make_attribute("scale", 2.0)])
    clip_opt = helper.make_function("ai.h20", "ClipOpt", ["x", "lo", "hi"], ["y"],
                                    [helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip")],
                                    opsets, [])
    x = f32([[1, 7, 3, 7, -2], [0.5, -4, 9, 9, 9]])
    av, ai = topk_ref(x * 2, 2, largest=True)
    bv, bi = topk_ref(x * -1, 3, largest=False)
    return Case([const("k2", i64(2)), const("k3", i64(3)),
                 const("hi", np.array(4.0, dtype=np.float32)),
                 helper.make_node("Identity", ["x"], ["y"], name="y"),
                 helper.make_node("ScaledTopK", ["y", "k2"], ["av", "ai"], name="first",
                                  domain="ai.h20", largest=1),
                 helper.make_node("ScaledTopK", ["x", "k3"], ["bv", "bi"], name="second",
                                  domain="ai.h20", largest=0, scale=-1.0),
                 helper.make_node("ClipOpt", ["x", "", "hi"], ["c"], name="clipped",
                                  domain="ai.h20")],
                [("x", x, None)],
                [("av", av, None), ("ai", ai, None), ("bv", bv, None), ("bi", bi, None),
                 ("c", np.minimum(x, 4), None)],
                functions=[scaled, topk_last, clip_opt], opsets=[("ai.h20", 1)])


CASES = {
    "topk_ties": topk_ties,
    "topk_smallest_axis0_int64": topk_smallest_axis0_int64,
    "topk_middle_axis_unsorted": topk_middle_axis_unsorted,
    "topk_k_from_input_dim": topk_k_from_input_dim,
    "topk_k_min_short": topk_k_min(3),
    "topk_k_min_long": topk_k_min(9),
    "gather_elements_negative": gather_elements_negative,
    "gather_elements_axis0_int32": gather_elements_axis0_int32,
    "scatter_elements_none": scatter_elements_none,
    "scatter_elements_add_axis0": scatter_elements_add_axis0,
    "scatter_elements_max_int64": scatter_elements_max_int64,
    "split_sizes": split_sizes,
    "split_uneven": split_uneven,
    "mod_int64": mod_int64,
    "mod_int32_and_float": mod_int32_and_float,
    "bitwise": bitwise,
    "rounding": rounding,
    "clip": clip,
    "functions": functions,
}

if __name__ == "__main__":
    out_dir, names = sys.argv[1], sys.argv[2:] or list(CASES)
    for name in names:
        CASES[name]().write(out_dir, name)
