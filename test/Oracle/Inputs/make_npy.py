"""make_npy.py DTYPE DIMS PATH [--zeros] [--descr D] [--fortran] [--raw]
[--drop N]: a .npy (no numpy needed) of dtype DTYPE ('f4', 'f2', 'f8', 'i8',
'i4', 'i2', 'i1', 'u1', 'u2', 'u4', 'u8', 'b1'), shape DIMS (comma-separated
ints, '' for a scalar) holding element i = i * 0.25 - 1 (floats), i - 3
(signed), i (unsigned) or i % 2 (bool), or zeros with --zeros. The header is
the one numpy and ort-run write (version 1.0, data at a multiple of 64
bytes), so outputs can be compared byte for byte. --descr writes another
descr (e.g. '>f4', '<c8') over the same bytes, --fortran sets fortran_order,
--raw writes the data bytes only, --drop N leaves off the last N bytes."""
import struct
import sys

args = sys.argv[1:]
dtype, dims_text, path = args[0], args[1], args[2]
opts = args[3:]
dims = [int(d) for d in dims_text.split(",") if d]
count = 1
for d in dims:
    count *= d
fmt = {"f4": "f", "f2": "e", "f8": "d", "i8": "q", "i4": "i", "i2": "h", "i1": "b",
       "u1": "B", "u2": "H", "u4": "I", "u8": "Q", "b1": "?"}[dtype]
def value(i):
    if "--zeros" in opts:
        return 0
    if dtype[0] == "f":
        return i * 0.25 - 1
    if dtype[0] == "i":
        return i - 3
    if dtype[0] == "u":
        return i
    return bool(i % 2)
data = b"".join(struct.pack("<" + fmt, value(i)) for i in range(count))
order = "|" if dtype in ("b1", "i1", "u1") else "<"
descr = opts[opts.index("--descr") + 1] if "--descr" in opts else order + dtype
fortran = "True" if "--fortran" in opts else "False"
shape = "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")"
header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
out = data if "--raw" in opts else \
    b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data
if "--drop" in opts:
    out = out[:len(out) - int(opts[opts.index("--drop") + 1])]
with open(path, "wb") as f:
    f.write(out)
