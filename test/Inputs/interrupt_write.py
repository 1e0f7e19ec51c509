#!/usr/bin/env python3
"""Interrupts a command while it writes OUT and checks it leaves nothing.

Usage: interrupt_write.py [--early] [--keep] SIGNAL OUT CMD [ARGS...]

CMD must write OUT with writeFileAtomically (h20-opt -o, h20-run outputs).
It runs with H20_TEST_PAUSE_IN_ATOMIC_WRITE_MS set, which holds the write
open halfway through the temporary file OUT.tmp-XXXXXX; once that file
exists, SIGNAL (TERM, INT, HUP) is sent to the process, as `kill` would. With
--early the signal is sent 0.2 s after the start instead (before any write:
the compile is still running). With --keep, OUT exists beforehand (holding
"keep") and must be left as it was.

Passes (prints "interrupted: ok") iff CMD died of SIGNAL and the directory
holds no OUT.tmp-* and no OUT (or the untouched OUT with --keep). Waits are
for events, with long timeouts, so a slow (e.g. sanitizer) build is not a
failure.
"""
import glob
import os
import signal
import subprocess
import sys
import time

args = sys.argv[1:]
early = "--early" in args
keep = "--keep" in args
args = [a for a in args if a not in ("--early", "--keep")]
sig = getattr(signal, "SIG" + args[0])
out, cmd = args[1], args[2:]
pattern = glob.escape(out) + ".tmp-*"


def fail(message, proc=None):
    if proc is not None:
        proc.kill()
        message += "\n" + proc.communicate()[0].decode(errors="replace")
    print("interrupted: FAILED: " + message)
    sys.exit(1)


if glob.glob(pattern):
    fail("temporary files exist before the run: %s" % glob.glob(pattern))
if keep:
    with open(out, "w") as f:
        f.write("keep\n")
elif os.path.exists(out):
    os.unlink(out)


def defaults():
    # A parent that ignores SIGINT (a background job) must not hide the test.
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)


env = dict(os.environ, H20_TEST_PAUSE_IN_ATOMIC_WRITE_MS="120000")
proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        preexec_fn=defaults)
start = time.monotonic()
if early:
    time.sleep(0.2)
    if proc.poll() is not None:
        fail("the command ended (exit %d) before the signal" % proc.returncode, proc)
else:
    while not glob.glob(pattern):
        if proc.poll() is not None:
            fail("the command ended (exit %d) before writing %s" % (proc.returncode, pattern),
                 proc)
        if time.monotonic() - start > 600:
            fail("no temporary file after 600 s", proc)
        time.sleep(0.02)
proc.send_signal(sig)
try:
    output = proc.communicate(timeout=120)[0].decode(errors="replace")
except subprocess.TimeoutExpired:
    fail("the command did not end within 120 s of the signal", proc)
if proc.returncode != -sig:
    fail("exit status %d, expected death by signal %d\n%s" % (proc.returncode, sig, output))
left = glob.glob(pattern)
if left:
    fail("temporary files left behind: %s" % left)
if keep:
    if open(out).read() != "keep\n":
        fail("%s was changed" % out)
elif os.path.exists(out):
    fail("%s was written" % out)
print("interrupted: ok")
