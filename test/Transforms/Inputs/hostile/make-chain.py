"""make-chain.py N OP OUT: an onnxtext graph of N nodes in one chain
(y = OP(OP(...OP(x)))), float Relu or int64 Add of 1, to check that shape
inference and the passes after it do not recurse once per node."""
import sys

n, op, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
dtype = "int64" if op == "Add" else "float"
lines = ['<', '  ir_version: 10,', '  opset_import: ["" : 18]', '>',
         'agraph (%s[2, 3] x) => (%s[2, 3] y) {' % (dtype, dtype)]
if op == "Add":
    lines.append("  one = Constant <value = int64 {1}> ()")
prev = "x"
for i in range(n):
    lines.append("  t%d = %s (%s%s)" % (i, op, prev, ", one" if op == "Add" else ""))
    prev = "t%d" % i
lines += ["  y = Identity (%s)" % prev, "}"]
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
