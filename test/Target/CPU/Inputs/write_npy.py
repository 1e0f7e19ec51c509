"""write_npy.py DTYPE DIMS PATH [--header-only]: a .npy of zeros ('<' +
DTYPE, shape DIMS as comma-separated ints) without numpy, for runtime input
tests; --header-only writes no data (for dtypes no data could match)."""
import struct
import sys

dtype, dims, path = sys.argv[1], [int(d) for d in sys.argv[2].split(",")], sys.argv[3]
shape = "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")"
header = "{'descr': '<%s', 'fortran_order': False, 'shape': %s, }" % (dtype, shape)
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
count = 1
for d in dims:
    count *= d
size = int(dtype[1:])
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    if "--header-only" not in sys.argv[4:]:
        f.write(b"\0" * (count * size))
