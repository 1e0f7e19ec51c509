#!/usr/bin/env python3
"""Writes a copy of an h20 artifact with its manifest changed, the header's
sizes and CRC-32 recomputed (the layout in include/h20/Runtime/Format/
Artifact.h), so that a test reaches the runtime's own manifest checks
rather than the file's integrity check.

Usage: edit_manifest.py IN.h20 OUT.h20 KEY.PATH=JSON [...]
KEY.PATH is a dotted path into the manifest (list indices as numbers),
JSON the new value, e.g. cpu_chunked.caches.0.dtype='"float16"'.
"""
import json
import struct
import sys
import zlib

HEADER = struct.Struct("<8sIIQQII")


def main():
    src, dst, edits = sys.argv[1], sys.argv[2], sys.argv[3:]
    data = open(src, "rb").read()
    magic, version, r0, msize, psize, _, r1 = HEADER.unpack_from(data)
    manifest = json.loads(data[HEADER.size:HEADER.size + msize])
    payload = data[HEADER.size + msize:HEADER.size + msize + psize]
    for edit in edits:
        path, value = edit.split("=", 1)
        keys = [int(k) if k.isdigit() else k for k in path.split(".")]
        node = manifest
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = json.loads(value)
    text = json.dumps(manifest, indent=1).encode()
    crc = zlib.crc32(text + payload) & 0xFFFFFFFF
    with open(dst, "wb") as f:
        f.write(HEADER.pack(magic, version, r0, len(text), len(payload), crc, r1))
        f.write(text + payload)


if __name__ == "__main__":
    main()
