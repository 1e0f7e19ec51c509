#!/usr/bin/env python3
"""Runs a command and succeeds only if it exits with the expected code.

Usage: expect_exit.py CODE CMD [ARGS...]
The command's stderr and stdout are forwarded to stdout so FileCheck can read
them. Used by lit tests that pin h20's exit codes (2 = bad input).
"""
import subprocess
import sys

want = int(sys.argv[1])
proc = subprocess.run(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
sys.stdout.buffer.write(proc.stdout)
if proc.returncode != want:
    print(f"expect_exit: exit code {proc.returncode}, expected {want}", file=sys.stderr)
    sys.exit(1)
