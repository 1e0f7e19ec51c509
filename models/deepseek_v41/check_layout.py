#!/usr/bin/env python3
"""Check that a full export can stand in for a --graph-only one.

An artifact compiled from `export.py --graph-only CONFIG` records every
weight by initializer name and byte range in model.onnx.data, and h20-run
checks only the data file's size before it reads those ranges. So running
it with `--weights-dir` on the export of a real checkpoint of the same
config (generate.py, same flags) is right only if that export lays its
weights out the same: the same external initializers in the same order,
with the same names, element types, shapes, offsets and lengths, and a
data file of the size they imply. That, and the same graph structure
(each node's op, domain, inputs, outputs and attribute names: another
flag or config changes it), is checked; a difference exits 1, naming
the first. Attribute values, small constants and model-level fields that
differ only warn: the artifact keeps the graph-only export's own, and
another onnx / numpy (the GPU machine's) may compute a constant to
another last bit. The graph-only directory needs only its model.onnx
(its data file, a sparse hole, may be left behind).

Usage: check_layout.py GRAPH_ONLY_DIR EXPORT_DIR
"""
import os
import sys

import onnx


def read(d):
    """(bytes, ModelProto) of d/model.onnx, its external data left unread."""
    with open(os.path.join(d, "model.onnx"), "rb") as f:
        blob = f.read()
    return blob, onnx.load_model_from_string(blob)


def weights(model):
    """[(name, data_type, dims, location, offset, length)] of the external
    initializers (the weights), in order."""
    out = []
    for t in model.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        ext = {e.key: e.value for e in t.external_data}
        out.append((t.name, t.data_type, tuple(t.dims), ext.get("location"), int(ext.get("offset", 0)),
                    int(ext.get("length", 0))))
    return out


def constants(model):
    """{name: TensorProto} of the initializers stored in the graph."""
    return {t.name: t for t in model.graph.initializer if t.data_location != onnx.TensorProto.EXTERNAL}


def data_end(rows):
    return max((off + length for *_, off, length in rows), default=0)


def node_shape(n):
    return (n.op_type, n.domain, tuple(n.input), tuple(n.output), tuple(a.name for a in n.attribute))


def compare(graph_dir, export_dir):
    """(problems, warnings): lists of differences; problems empty when the
    export can stand in for the graph-only one."""
    (blob_a, a), (blob_b, b) = read(graph_dir), read(export_dir)
    wa, wb = weights(a), weights(b)
    problems, warnings = [], []
    if len(wa) != len(wb):
        problems.append(f"{len(wa)} weights in the graph-only export, {len(wb)} in the full one")
    for i, (x, y) in enumerate(zip(wa, wb)):
        if x != y:
            problems.append(f"weight {i}: graph-only {x} != full {y}")
            break
    names_a, names_b = {r[0] for r in wa}, {r[0] for r in wb}
    for name in sorted(names_a ^ names_b)[:5]:
        problems.append(f"weight {name!r} only in the {'graph-only' if name in names_a else 'full'} export")
    want = data_end(wa)
    data = os.path.join(export_dir, "model.onnx.data")
    have = os.path.getsize(data) if os.path.exists(data) else None
    if have != want:
        problems.append(f"{data}: {have} bytes, the graph-only export's weights end at {want}")
    # Another graph would compute something else from the same bytes.
    na, nb = a.graph.node, b.graph.node
    if len(na) != len(nb):
        problems.append(f"{len(na)} nodes in the graph-only export, {len(nb)} in the full one")
    for i, (x, y) in enumerate(zip(na, nb)):
        if node_shape(x) != node_shape(y):
            problems.append(f"node {i}: graph-only {x.op_type} {x.name!r} != full {y.op_type} {y.name!r}")
            break
    ca, cb = constants(a), constants(b)
    if {n: (t.data_type, tuple(t.dims)) for n, t in ca.items()} != \
            {n: (t.data_type, tuple(t.dims)) for n, t in cb.items()}:
        problems.append("the graphs' constants differ in name, type or shape")
    if problems:
        return problems, warnings
    # Values alone: warnings (module docstring).
    diff = [n for n in ca if ca[n].SerializeToString() != cb[n].SerializeToString()]
    if diff:
        warnings.append(f"{len(diff)} constant(s) differ in value, e.g. {diff[0]!r}")
    diff = [x.name for x, y in zip(na, nb) if x.SerializeToString() != y.SerializeToString()]
    if diff:
        warnings.append(f"{len(diff)} node(s) differ in attribute values, e.g. {diff[0]!r}")
    if not warnings and blob_a != blob_b:
        warnings.append("model.onnx files differ outside the graph's nodes and initializers "
                        "(functions, opsets or producer)")
    return problems, warnings


def main():
    if len(sys.argv) != 3:
        print("usage: " + __doc__.split("Usage: ")[1].strip(), file=sys.stderr)
        sys.exit(2)
    problems, warnings = compare(sys.argv[1], sys.argv[2])
    if problems:
        print("check_layout: the full export does not match the graph-only one the artifacts were "
              "compiled from:", file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        sys.exit(1)
    for w in warnings:
        print(f"check_layout: warning: {w} (the artifact keeps its own)", file=sys.stderr)
    rows = weights(read(sys.argv[1])[1])
    print(f"check_layout: same layout ({len(rows)} weights, {data_end(rows)} bytes)")


if __name__ == "__main__":
    main()
