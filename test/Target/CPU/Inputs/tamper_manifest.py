"""tamper_manifest.py IN OUT EDIT: rewrite an h20 artifact's manifest with a
valid CRC, as a hostile or buggy producer could. EDIT: drop-weight |
grow-output | drop-vocab | dims-from-negative (an output's dynamic dim sized
from input dim -1) | float-vocab (vocab_size 1e300) | unknown-output-dtype |
huge-weight (a weight of 2^62 elements)."""
import json
import struct
import sys
import zlib

data = open(sys.argv[1], "rb").read()
m, p = struct.unpack_from("<QQ", data, 16)
manifest = json.loads(data[40:40 + m])
payload = data[40 + m:]
edit = sys.argv[3]
if edit == "drop-weight":
    manifest["weights"].pop()
elif edit == "grow-output":
    manifest["outputs"][0]["shape"][-1] += 7
elif edit == "drop-vocab":
    del manifest["vocab_size"]
elif edit == "dims-from-negative":
    manifest["outputs"][0]["dims_from"][1]["dim"] = -1
elif edit == "float-vocab":
    manifest["vocab_size"] = 1e300
elif edit == "unknown-output-dtype":
    manifest["outputs"][0]["dtype"] = "unsupported"
elif edit == "huge-weight":
    manifest["weights"][0]["shape"] = [2 ** 31, 2 ** 31]
else:
    sys.exit("unknown edit " + edit)
text = json.dumps(manifest).encode()
crc = zlib.crc32(payload, zlib.crc32(text))
header = data[:8] + struct.pack("<II", 1, 0) + struct.pack("<QQ", len(text), len(payload)) + struct.pack("<II", crc, 0)
open(sys.argv[2], "wb").write(header + text + payload)
