"""Small ONNX graph builder for the DeepSeek-V4.1 exporter.

`Graph` collects nodes, small constants and weights (weights stream to one
external-data file, 64-byte aligned, as they are added — the exporter never
holds more than one checkpoint tensor). `Graph(function=True)` builds a
FunctionProto body instead: constants become Constant nodes (functions have no
initializers) and attribute references (`ref("name")`) are allowed.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ALIGN = 64
OPSET = 23
H20_DOMAIN = "ai.h20"


def _tensor_type(dtype):
    """TensorProto data type of numpy `dtype`: helper.np_dtype_to_tensor_dtype
    (onnx >= 1.13; onnx 1.19 removed onnx.mapping), else onnx.mapping
    (Debian 12's onnx 1.12)."""
    if hasattr(helper, "np_dtype_to_tensor_dtype"):
        return helper.np_dtype_to_tensor_dtype(dtype)
    return onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[dtype]


class Ref:
    """An attribute of the enclosing function, by name (ref_attr_name)."""

    def __init__(self, name, kind):
        self.name, self.kind = name, kind


def ref(name, kind="INT"):
    return Ref(name, kind)


class ExternalData:
    """Appends tensors to one external-data file; returns TensorProtos that
    point into it (onnx/docs/ExternalData.md: location, offset, length)."""

    def __init__(self, path):
        self.path = path
        self.tmp = path + ".tmp"
        self.f = open(self.tmp, "wb")
        self.offset = 0

    def add(self, name, arr, onnx_type=None):
        """`onnx_type`: the TensorProto data type when numpy has none (FP8
        codes as uint8 with FLOAT8E4M3FN = 17)."""
        arr = np.ascontiguousarray(arr)
        self.offset += -self.offset % ALIGN
        self.f.seek(self.offset)
        self.f.write(arr.tobytes())
        t = self._external(name, arr.shape, arr.dtype, self.offset, arr.nbytes, onnx_type)
        self.offset += arr.nbytes
        return t

    def add_stacked(self, name, parts, count):
        """One tensor [count, *part.shape] from `count` equally shaped arrays
        written back to back as they come (only one is held at a time)."""
        self.offset += -self.offset % ALIGN
        self.f.seek(self.offset)
        start, shape, dtype = self.offset, None, None
        for arr in parts:
            if shape is not None and (arr.shape != shape or arr.dtype != dtype):
                raise ValueError(f"{name}: stacked parts differ in shape or dtype")
            shape, dtype = arr.shape, arr.dtype
            self.f.write(arr.tobytes())
            self.offset += arr.nbytes
        return self._external(name, [count, *shape], dtype, start, self.offset - start)

    def _external(self, name, shape, dtype, offset, length, onnx_type=None):
        """TensorProto pointing at [offset, offset + length) of the data file."""
        t = TensorProto()
        t.name = name
        # By number: Debian 12's onnx 1.12 has no float8 types.
        t.data_type = onnx_type or _tensor_type(np.dtype(dtype))
        t.dims.extend(shape)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", os.path.basename(self.path)), ("offset", str(offset)),
                     ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, v
        return t

    def reserve(self, name, shape, dtype, onnx_type=None):
        """Like add() for a tensor of zeros whose bytes are never written: the
        file gets a hole (sparse), so a graph-only export of a model with
        hundreds of GB of weights takes no space or time."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        self.offset += -self.offset % ALIGN
        t = self._external(name, shape, dtype, self.offset, nbytes, onnx_type)
        self.offset += nbytes
        return t

    def abandon(self):
        """Drop the partial file (an export that failed leaves nothing behind)."""
        self.f.close()
        os.unlink(self.tmp)

    def close(self):
        self.f.truncate(self.offset)
        self.f.close()
        os.replace(self.tmp, self.path)


class Graph:
    def __init__(self, function=False, prefix=""):
        self.function = function
        self.prefix = prefix
        self.nodes, self.initializers = [], []
        self.count = 0
        self._consts = {}

    def fresh(self, hint):
        self.count += 1
        return f"{self.prefix}{hint}_{self.count}"

    def op(self, op_type, inputs, n_out=1, name=None, domain="", outs=None, **attrs):
        """Append one node; returns its output name (or list if n_out > 1)."""
        hint = name or op_type
        outputs = outs or [self.fresh(hint) for _ in range(n_out)]
        node = helper.make_node(op_type, list(inputs), outputs, name=self.fresh(hint + "_node"), domain=domain)
        for k, v in attrs.items():
            if isinstance(v, Ref):
                a = onnx.AttributeProto()
                a.name, a.ref_attr_name = k, v.name
                a.type = getattr(onnx.AttributeProto, v.kind)
                node.attribute.append(a)
            else:
                node.attribute.append(helper.make_attribute(k, v))
        self.nodes.append(node)
        return outputs[0] if n_out == 1 else outputs

    def const(self, value, dtype=None, hint="c"):
        """A small constant (np array or Python scalar/list), deduplicated."""
        arr = np.array(value, dtype=dtype) if dtype is not None or not isinstance(value, np.ndarray) else value
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key in self._consts:
            return self._consts[key]
        name = self.fresh(hint)
        tensor = numpy_helper.from_array(arr, name)
        if self.function:
            self.nodes.append(helper.make_node("Constant", [], [name], name=self.fresh("const_node"), value=tensor))
        else:
            self.initializers.append(tensor)
        self._consts[key] = name
        return name

    def i64(self, *values):
        return self.const(np.array(values, dtype=np.int64))

    def scalar_from_attr(self, attr, kind="INT"):
        """A scalar tensor holding the enclosing function's attribute."""
        if kind == "INT":
            return self.op("Constant", [], name=attr, value_int=ref(attr, "INT"))
        return self.op("Constant", [], name=attr, value_float=ref(attr, "FLOAT"))

    # -- shape helpers
    def dim(self, x, axis):
        """Shape(x)[axis] as an int64 [1] tensor."""
        if axis == -1:
            return self.op("Shape", [x], name="dim", start=-1)
        return self.op("Shape", [x], name="dim", start=axis, end=axis + 1)

    def reshape(self, x, shape_parts):
        """Reshape to the concatenation of shape parts: ints or [1]-tensors."""
        if all(isinstance(p, int) for p in shape_parts):
            return self.op("Reshape", [x, self.i64(*shape_parts)])
        parts = [self.i64(p) if isinstance(p, int) else p for p in shape_parts]
        return self.op("Reshape", [x, self.op("Concat", parts, axis=0)])
