#!/usr/bin/env python3
"""matrix_table.py CPU.json GPU.json [TARGET]

Prints the real-export matrix (MODELS.md) as a Markdown table from
check.py's --json records: the CPU run (which also holds what was raised)
and the GPU run on TARGET (default h200). Per cell: the worst relative L2
over the prompt lengths against PyTorch in the export's dtype, and whether
every length gave PyTorch's next token."""
import json
import sys


def worst(rec):
    if not rec or rec.get("status") != "pass":
        return (rec or {}).get("status", "-"), "-"
    runs = rec.get("runs", {}).values()
    rel = max(r["rel_l2"] for r in runs)
    same = all(r["same_next"] for r in runs)
    return f"{rel:.1e}", "same" if same else "differs"


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    cpu, gpu = json.load(open(argv[1])), json.load(open(argv[2]))
    target = argv[3] if len(argv) > 3 else "h200"
    print(f"| export | raised: attention / rope / rms_norm | CPU worst rel. L2 | {target.upper()} worst rel. L2 | {target.upper()} next token |")
    print("| --- | --- | --- | --- | --- |")
    for name in sorted(set(cpu) | set(gpu)):
        r = cpu.get(name, {}).get("raised", {})
        raised = f"{r.get('attention', 0)} / {r.get('rope', 0)} / {r.get('rms_norm', 0)}"
        c, _ = worst(cpu.get(name, {}).get("cpu"))
        g, same = worst(gpu.get(name, {}).get(target))
        print(f"| {name} | {raised} | {c} | {g} | {same} |")


if __name__ == "__main__":
    main(sys.argv)
