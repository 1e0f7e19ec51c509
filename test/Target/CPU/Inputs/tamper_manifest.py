"""tamper_manifest.py IN OUT EDIT: rewrite an h20 artifact's manifest with a
valid CRC, as a hostile or buggy producer could. EDIT: drop-weight |
grow-output | drop-vocab."""
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
text = json.dumps(manifest).encode()
crc = zlib.crc32(payload, zlib.crc32(text))
header = data[:8] + struct.pack("<II", 1, 0) + struct.pack("<QQ", len(text), len(payload)) + struct.pack("<II", crc, 0)
open(sys.argv[2], "wb").write(header + text + payload)
