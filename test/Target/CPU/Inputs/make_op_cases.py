"""make_op_cases.py OUT_DIR [CASE ...]: small ONNX models of the ops h20
added for DeepSeek-V4.1 (TopK, GatherElements, ScatterElements, Mod, the
Bitwise ops, Round/Floor/Ceil/Sign/Clip, Split, model-local functions) and
for issue 27's edge cases (LayerNormalization, GatherND, CumSum, Trilu,
Slice with negative steps and INT64 sentinels, Range with negative or
fractional deltas, Softplus of large inputs), each
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
              np.dtype(np.int32): TensorProto.INT32, np.dtype(np.float16): TensorProto.FLOAT16,
              np.dtype(np.float64): TensorProto.DOUBLE}


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


# --- issue 27: hostile and edge-case graphs --------------------------------

I64_MAX, I64_MIN = 2**63 - 1, -2**63


def layer_norm_ref(x, scale, bias, axis, eps):
    """float64 two-pass reference: mean, then the mean of squared
    deviations; Mean and InvStdDev keep the normalized dims as 1."""
    axes = tuple(range(axis % x.ndim, x.ndim))
    xd = x.astype(np.float64)
    mean = xd.mean(axis=axes, keepdims=True)
    var = np.square(xd - mean).mean(axis=axes, keepdims=True)
    inv = 1.0 / np.sqrt(var + float(np.float32(eps)))
    y = (xd - mean) * inv * scale.astype(np.float64)
    if bias is not None:
        y = y + bias.astype(np.float64)
    return y.astype(x.dtype), mean.astype(np.float32), inv.astype(np.float32)


def gather_nd_ref(data, ind, batch_dims):
    """ONNX GatherND, one output slice at a time; negative indices count
    from the end of their dim."""
    m = ind.shape[-1]
    out = np.zeros(ind.shape[:-1] + data.shape[batch_dims + m:], dtype=data.dtype)
    for pos in np.ndindex(*ind.shape[:-1]):
        source = list(pos[:batch_dims])
        for k in range(m):
            i = int(ind[pos + (k,)])
            source.append(i + data.shape[batch_dims + k] if i < 0 else i)
        out[pos] = data[tuple(source)]
    return out


def cumsum_ref(x, axis, exclusive=False, reverse=False):
    """Running sums along `axis` by an explicit loop over its positions."""
    out = np.zeros_like(x)
    n = x.shape[axis]
    for i in range(n):
        js = range(i, n) if reverse else range(0, i + 1)
        total = np.zeros_like(np.take(x, 0, axis=axis))
        for j in js:
            if exclusive and j == i:
                continue
            total = total + np.take(x, j, axis=axis)
        idx = [slice(None)] * x.ndim
        idx[axis] = i
        out[tuple(idx)] = total
    return out


def trilu_ref(x, k, upper):
    """Keeps x[..., i, j] where j - i >= k (upper) or j - i <= k (lower)."""
    out = np.zeros_like(x)
    for pos in np.ndindex(*x.shape):
        i, j = pos[-2], pos[-1]
        if (j - i >= k) if upper else (j - i <= k):
            out[pos] = x[pos]
    return out


def slice_ref(x, starts, ends, axes, steps):
    """ONNX Slice-13's clamping rules written out: a negative bound counts
    from the end; step > 0 clamps start and end to [0, d], step < 0 clamps
    start to [0, d - 1] and end to [-1, d - 1]. Checked against Python's own
    slicing, which agrees on these rules."""
    y = x
    builtin = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        d = x.shape[a]
        builtin[a] = slice(s, e, st)
        s = s + d if s < 0 else s
        e = e + d if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
        else:
            s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
        y = np.take(y, np.array(list(range(s, e, st)), dtype=np.int64), axis=a)
    assert np.array_equal(y, x[tuple(builtin)])
    return y


def range_ref(start, limit, delta, dtype):
    """ONNX Range: max(ceil((limit - start) / delta), 0) elements
    start + i * delta, computed in Python numbers."""
    n = max(int(np.ceil((limit - start) / delta)), 0)
    return np.array([start + i * delta for i in range(n)], dtype=dtype)


def scalar(name, value, dtype):
    return const(name, np.array(value, dtype=dtype))


def layernorm_last_axis():
    # axis = -1 of [2, 3, 8], Scale and B, all three outputs.
    rng = np.random.default_rng(27)
    x = rng.normal(size=(2, 3, 8)).astype(np.float32)
    scale = rng.normal(size=8).astype(np.float32)
    bias = rng.normal(size=8).astype(np.float32)
    y, mean, inv = layer_norm_ref(x, scale, bias, -1, 1e-5)
    return Case([helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y", "mean", "inv"],
                                  name="ln", axis=-1)],
                [("x", x, None), ("scale", scale, None), ("bias", bias, None)],
                [("y", y, None), ("mean", mean, None), ("inv", inv, None)])


def layernorm_axis1_scale_only():
    # axis = 1 of [2, 3, 4] (normalized over [3, 4]), no B, epsilon 1e-2,
    # stash_type = 1 given; Mean omitted (empty name), InvStdDev requested.
    rng = np.random.default_rng(28)
    x = rng.normal(size=(2, 3, 4)).astype(np.float32)
    scale = rng.normal(size=(3, 4)).astype(np.float32)
    y, _, inv = layer_norm_ref(x, scale, None, 1, 1e-2)
    return Case([helper.make_node("LayerNormalization", ["x", "scale"], ["y", "", "inv"], name="ln",
                                  axis=1, epsilon=1e-2, stash_type=1)],
                [("x", x, None), ("scale", scale, None)],
                [("y", y, None), ("inv", inv, None)])


def layernorm_negative_axis():
    # axis = -2 of [2, 3, 4, 5] (normalized over [4, 5]); Mean only beside Y.
    rng = np.random.default_rng(29)
    x = (rng.normal(size=(2, 3, 4, 5)) * 3 + 1).astype(np.float32)
    scale = rng.normal(size=(4, 5)).astype(np.float32)
    bias = rng.normal(size=(4, 5)).astype(np.float32)
    y, mean, _ = layer_norm_ref(x, scale, bias, -2, 1e-5)
    return Case([helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y", "mean"],
                                  name="ln", axis=-2)],
                [("x", x, None), ("scale", scale, None), ("bias", bias, None)],
                [("y", y, None), ("mean", mean, None)])


def layernorm_axis0():
    # axis = 0: the whole tensor is one group; Mean and InvStdDev are [1, 1].
    rng = np.random.default_rng(30)
    x = rng.normal(size=(3, 4)).astype(np.float32)
    scale = rng.normal(size=(3, 4)).astype(np.float32)
    bias = rng.normal(size=(3, 4)).astype(np.float32)
    y, mean, inv = layer_norm_ref(x, scale, bias, 0, 1e-5)
    return Case([helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y", "mean", "inv"],
                                  name="ln", axis=0)],
                [("x", x, None), ("scale", scale, None), ("bias", bias, None)],
                [("y", y, None), ("mean", mean, None), ("inv", inv, None)])


def layernorm_large_mean():
    # x = 1e4 + noise of std 0.05 in float32: a one-pass variance
    # (E[x^2] - E[x]^2) cancels catastrophically here, and so does a mean
    # rounded to float32 (its ulp, ~1e-3, is 2% of the noise).
    rng = np.random.default_rng(31)
    x = (1e4 + rng.normal(scale=0.05, size=(4, 64))).astype(np.float32)
    scale = rng.normal(size=64).astype(np.float32)
    bias = rng.normal(size=64).astype(np.float32)
    y, mean, inv = layer_norm_ref(x, scale, bias, -1, 1e-5)
    return Case([helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y", "mean", "inv"],
                                  name="ln", axis=-1)],
                [("x", x, None), ("scale", scale, None), ("bias", bias, None)],
                [("y", y, None), ("mean", mean, None), ("inv", inv, None)])


def gathernd_batch0():
    # batch_dims = 0: whole index tuples of length 1, 2 and 3 (a slice, a
    # row, an element), negative indices among them.
    data = np.arange(24, dtype=np.float32).reshape(3, 4, 2) - 7.5
    i1 = i64([[2], [-1], [0]])
    i2 = i64([[[0, -1], [2, 1]], [[-3, 0], [1, -4]]])
    i3 = i64([[1, 3, -1], [-1, -1, 0]])
    return Case([helper.make_node("GatherND", ["data", "i1"], ["y1"], name="g1"),
                 helper.make_node("GatherND", ["data", "i2"], ["y2"], name="g2", batch_dims=0),
                 helper.make_node("GatherND", ["data", "i3"], ["y3"], name="g3")],
                [("data", data, None), ("i1", i1, None), ("i2", i2, None), ("i3", i3, None)],
                [("y1", gather_nd_ref(data, i1, 0), None), ("y2", gather_nd_ref(data, i2, 0), None),
                 ("y3", gather_nd_ref(data, i3, 0), None)])


def gathernd_batch_dims():
    # batch_dims = 1 (rows of each batch) and 2 (elements of each [b0, b1]),
    # on int64 data, negative indices.
    d1 = np.arange(24, dtype=np.int64).reshape(2, 3, 4) * 3 - 20
    i1 = i64([[[2], [-3]], [[0], [-1]]])
    d2 = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5) / 4
    i2 = i64([[[0, -1], [3, 2], [-4, 0]], [[1, 1], [-2, -5], [2, 4]]])
    return Case([helper.make_node("GatherND", ["d1", "i1"], ["y1"], name="g1", batch_dims=1),
                 helper.make_node("GatherND", ["d2", "i2"], ["y2"], name="g2", batch_dims=2)],
                [("d1", d1, None), ("i1", i1, None), ("d2", d2, None), ("i2", i2, None)],
                [("y1", gather_nd_ref(d1, i1, 1), None), ("y2", gather_nd_ref(d2, i2, 2), None)])


def cumsum_modes():
    # Every (exclusive, reverse) pair along axis 1, given as a 0-d tensor.
    x = f32([[1, 2, 3, 4, 5], [0.5, -1, 2.25, 8, -3], [10, 20, 30, 40, 50]])
    nodes, outputs = [scalar("axis", 1, np.int64)], []
    for ex in (0, 1):
        for rev in (0, 1):
            name = "ex%d_rev%d" % (ex, rev)
            nodes.append(helper.make_node("CumSum", ["x", "axis"], [name], name=name,
                                          exclusive=ex, reverse=rev))
            outputs.append((name, cumsum_ref(x, 1, bool(ex), bool(rev)), None))
    return Case(nodes, [("x", x, None)], outputs)


def cumsum_axes_int():
    # A negative axis given as a 1-element tensor (-3 of rank 3, axis 0),
    # int64 and int32 data, reverse and exclusive on a middle axis.
    a = np.arange(24, dtype=np.int64).reshape(2, 3, 4) * 7 - 50
    b = (np.arange(24, dtype=np.int32).reshape(2, 3, 4) % 5) - 2
    return Case([const("first", i64([-3])), const("middle", np.array([-2], dtype=np.int32)),
                 helper.make_node("CumSum", ["a", "first"], ["a0"], name="a0"),
                 helper.make_node("CumSum", ["a", "middle"], ["a1"], name="a1", reverse=1),
                 helper.make_node("CumSum", ["b", "middle"], ["b1"], name="b1", exclusive=1,
                                  reverse=1)],
                [("a", a, None), ("b", b, None)],
                [("a0", cumsum_ref(a, 0), None), ("a1", cumsum_ref(a, 1, reverse=True), None),
                 ("b1", cumsum_ref(b, 1, exclusive=True, reverse=True), None)])


def trilu_default_k():
    # Batched [2, 3, 5] (M != N): upper (the default) and lower, no k.
    x = np.arange(30, dtype=np.float32).reshape(2, 3, 5) + 1
    return Case([helper.make_node("Trilu", ["x"], ["up"], name="up"),
                 helper.make_node("Trilu", ["x"], ["low"], name="low", upper=0)],
                [("x", x, None)],
                [("up", trilu_ref(x, 0, True), None), ("low", trilu_ref(x, 0, False), None)])


def trilu_k_values():
    # k = 2, -1 and out of range (7 and -9 on a [5, 3] / [2, 5, 3] matrix)
    # for both triangles; int64 data.
    x = np.arange(30, dtype=np.int64).reshape(2, 5, 3) - 10
    nodes, outputs = [], []
    for k in (2, -1, 7, -9):
        kn = "k%s" % str(k).replace("-", "m")
        nodes.append(scalar(kn, k, np.int64))
        for upper in (1, 0):
            name = "%s_%s" % ("up" if upper else "low", kn)
            nodes.append(helper.make_node("Trilu", ["x", kn], [name], name=name, upper=upper))
            outputs.append((name, trilu_ref(x, k, bool(upper)), None))
    return Case(nodes, [("x", x, None)], outputs)


def trilu_k_input():
    # k read at run time from a graph input (a 0-d int64 tensor).
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    k = np.array(-1, dtype=np.int64)
    return Case([helper.make_node("Trilu", ["x", "k"], ["up"], name="up"),
                 helper.make_node("Trilu", ["x", "k"], ["low"], name="low", upper=0)],
                [("x", x, None), ("k", k, None)],
                [("up", trilu_ref(x, -1, True), None), ("low", trilu_ref(x, -1, False), None)])


def slice_case(x, specs, dims=None):
    """One Slice per (starts, ends, axes, steps), each followed by an
    Identity (the Slice's own type comes from shape inference)."""
    nodes, outputs = [], []
    for n, (starts, ends, axes, steps) in enumerate(specs):
        names = ["s%d_%s" % (n, w) for w in ("starts", "ends", "axes", "steps")]
        for name, values in zip(names, (starts, ends, axes, steps)):
            nodes.append(const(name, i64(list(values))))
        nodes.append(helper.make_node("Slice", ["x"] + names, ["t%d" % n], name="slice%d" % n))
        nodes.append(helper.make_node("Identity", ["t%d" % n], ["y%d" % n], name="y%d" % n))
        ref = slice_ref(x, starts, ends, axes, steps)
        outputs.append(("y%d" % n, ref, None if dims is None else dims[n]))
    return Case(nodes, [("x", x, None if dims is None else dims[-1])], outputs)


def slice_negative_steps():
    # Reversals and strides < 0 with INT64 sentinels: start INT64_MAX
    # (clamped to d - 1), end INT64_MIN and -INT64_MAX (clamped to -1: up to
    # and including element 0), end -1 (the last element, excluded), start
    # beyond the dim, two axes at once, and an empty result.
    x = np.arange(42, dtype=np.float32).reshape(6, 7)
    return slice_case(x, [
        ([-1], [I64_MIN], [1], [-1]),
        ([I64_MAX], [-I64_MAX], [0], [-2]),
        ([5, I64_MAX], [-1 - 6, 0], [1, 0], [-3, -1]),
        ([100], [-100], [1], [-1]),
        ([4], [-1], [0], [-1]),
        ([-3], [1], [-1], [-2]),
    ])


def slice_int64_sentinels():
    # Positive steps: start INT64_MIN (clamped to 0), end INT64_MAX and
    # -INT64_MAX, negative starts, steps 2 and 3 on int64 data.
    x = np.arange(60, dtype=np.int64).reshape(3, 4, 5) * 5 - 100
    return slice_case(x, [
        ([I64_MIN], [I64_MAX], [2], [2]),
        ([-2, I64_MIN], [I64_MAX, -I64_MAX], [1, 0], [3, 1]),
        ([1, -4], [I64_MAX, 5], [-1, 1], [1, 3]),
    ])


def slice_reverse_dynamic():
    # x[:, ::-1] and x[:, -2::-2] over a dynamic dim N (the output dim is N
    # itself, resp. a fresh symbol sized at run time).
    x = np.arange(14, dtype=np.float32).reshape(2, 7)
    case = slice_case(x, [([-1], [I64_MIN], [1], [-1])], dims=[[2, "N"], [2, "N"]])
    return case


def range_fractional_float():
    # Float Range with deltas 0.5 and -0.25 (counting down), and one whose
    # length rounds up (ceil(2.5 / 0.75) = 4).
    specs = [(0.0, 3.0, 0.5), (1.0, -1.0, -0.25), (-1.0, 1.5, 0.75)]
    nodes, outputs = [], []
    for n, (s, l, d) in enumerate(specs):
        names = ["r%d_%s" % (n, w) for w in ("start", "limit", "delta")]
        for name, v in zip(names, (s, l, d)):
            nodes.append(scalar(name, v, np.float32))
        nodes.append(helper.make_node("Range", names, ["t%d" % n], name="range%d" % n))
        nodes.append(helper.make_node("Identity", ["t%d" % n], ["y%d" % n], name="y%d" % n))
        outputs.append(("y%d" % n, range_ref(s, l, d, np.float32), None))
    return Case(nodes, [], outputs)


def range_int_down():
    # Integer Range counting down (int64 10 -> 0 by -3, int32 -2 -> -11 by
    # -4) and up by 3 (length ceil(7 / 3) = 3); the int64 one feeds a Gather.
    data = np.arange(11, dtype=np.float32) * 2
    nodes = [scalar("a_start", 10, np.int64), scalar("a_limit", 0, np.int64),
             scalar("a_delta", -3, np.int64),
             scalar("b_start", -2, np.int32), scalar("b_limit", -11, np.int32),
             scalar("b_delta", -4, np.int32),
             scalar("c_start", 1, np.int64), scalar("c_limit", 8, np.int64),
             scalar("c_delta", 3, np.int64),
             helper.make_node("Range", ["a_start", "a_limit", "a_delta"], ["a"], name="a"),
             helper.make_node("Range", ["b_start", "b_limit", "b_delta"], ["b"], name="b"),
             helper.make_node("Range", ["c_start", "c_limit", "c_delta"], ["c"], name="c"),
             helper.make_node("Identity", ["a"], ["ya"], name="ya"),
             helper.make_node("Identity", ["b"], ["yb"], name="yb"),
             helper.make_node("Identity", ["c"], ["yc"], name="yc"),
             helper.make_node("Gather", ["data", "a"], ["g"], name="g")]
    a = range_ref(10, 0, -3, np.int64)
    return Case(nodes, [("data", data, None)],
                [("ya", a, None), ("yb", range_ref(-2, -11, -4, np.int32), None),
                 ("yc", range_ref(1, 8, 3, np.int64), None), ("g", data[a], None)])


def softplus_large():
    # log(1 + exp(x)) overflows from x = 89 in float32; the stable form
    # does not. Both sides of its switch at 20 are covered. Reference:
    # float64 logaddexp(0, x).
    x = f32([-np.inf, -1000, -100, -20, -1, 0, 1e-8, 1, 19.5, 20, 20.5, 21, 88, 89, 100, 1000,
             np.inf])
    return Case([helper.make_node("Softplus", ["x"], ["y"], name="softplus")],
                [("x", x, None)],
                [("y", np.logaddexp(0.0, x.astype(np.float64)).astype(np.float32), None)])


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
    "layernorm_last_axis": layernorm_last_axis,
    "layernorm_axis1_scale_only": layernorm_axis1_scale_only,
    "layernorm_negative_axis": layernorm_negative_axis,
    "layernorm_axis0": layernorm_axis0,
    "layernorm_large_mean": layernorm_large_mean,
    "gathernd_batch0": gathernd_batch0,
    "gathernd_batch_dims": gathernd_batch_dims,
    "cumsum_modes": cumsum_modes,
    "cumsum_axes_int": cumsum_axes_int,
    "trilu_default_k": trilu_default_k,
    "trilu_k_values": trilu_k_values,
    "trilu_k_input": trilu_k_input,
    "slice_negative_steps": slice_negative_steps,
    "slice_int64_sentinels": slice_int64_sentinels,
    "slice_reverse_dynamic": slice_reverse_dynamic,
    "range_fractional_float": range_fractional_float,
    "range_int_down": range_int_down,
    "softplus_large": softplus_large,
}

# Issue 27's cases (onnx-op-numerics-issue27.test, the ONNX Runtime check and
# scripts/gpu-op-cases.sh run these).
ISSUE27 = [name for name in CASES if name.split("_")[0] in
           ("layernorm", "gathernd", "cumsum", "trilu", "slice", "range", "softplus")]

if __name__ == "__main__":
    # "issue27" stands for all of issue 27's cases.
    out_dir, names = sys.argv[1], sys.argv[2:] or list(CASES)
    names = [n for name in names for n in (ISSUE27 if name == "issue27" else [name])]
    for name in names:
        CASES[name]().write(out_dir, name)
