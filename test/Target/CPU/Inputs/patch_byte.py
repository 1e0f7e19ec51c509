"""patch_byte.py IN OUT OFFSET [VALUE]: copy IN to OUT with the byte at OFFSET
(negative: from the end) set to VALUE, or inverted when VALUE is omitted."""
import sys

data = bytearray(open(sys.argv[1], "rb").read())
offset = int(sys.argv[3])
data[offset] = int(sys.argv[4]) if len(sys.argv) > 4 else data[offset] ^ 0xFF
open(sys.argv[2], "wb").write(data)
