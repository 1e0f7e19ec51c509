"""make_function_bombs.py DIR: two hostile models in ONNX text syntax (no
onnx package needed): deep.onnxtext, a chain of 70 local functions each
calling the next; wide.onnxtext, 40 levels of functions each calling the
next twice (2^40 nodes if expanded)."""
import os
import sys

HEADER = '<\n  ir_version: 10,\n  opset_import: ["" : 23, "ai.h20" : 1]\n>\n'
GRAPH = 'agraph (float[2] x) => (float[2] y) {\n  y = ai.h20.F0 (x)\n}\n'


def function(i, body):
    return ('<\n  domain: "ai.h20",\n  opset_import: ["" : 23, "ai.h20" : 1]\n>\n'
            'F%d (a) => (b) {\n%s}\n' % (i, body))


def model(levels, calls):
    text = HEADER + GRAPH
    for i in range(levels):
        if i + 1 == levels:
            body = "  b = Neg (a)\n"
        elif calls == 1:
            body = "  b = ai.h20.F%d (a)\n" % (i + 1)
        else:
            body = "  t = ai.h20.F%d (a)\n  b = ai.h20.F%d (t)\n" % (i + 1, i + 1)
        text += function(i, body)
    return text


out = sys.argv[1]
with open(os.path.join(out, "deep.onnxtext"), "w") as f:
    f.write(model(70, 1))
with open(os.path.join(out, "wide.onnxtext"), "w") as f:
    f.write(model(40, 2))
