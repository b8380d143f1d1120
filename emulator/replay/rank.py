"""One rank of a user's program, inside its host (`bigraph-emu exec`).

  python -m emulator.replay.rank --dir FOLDER -- CMD ARGS...

Runs CMD in FOLDER with its stdout and stderr in FOLDER/stdout and
FOLDER/stderr, and writes FOLDER/exit.json with its exit code, its
start and end (time.monotonic(), one clock for every process of the
machine, as the link monitor's) and its processes' CPU seconds (what the
head cannot read of a rank on another server). A SIGTERM or SIGINT is passed on to CMD.
Standard library only.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m emulator.replay.rank")
    p.add_argument("--dir", required=True)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    os.makedirs(args.dir, exist_ok=True)
    os.chdir(args.dir)
    start = time.monotonic()
    with open("stdout", "ab") as out, open("stderr", "ab") as err:
        try:
            # close_fds=False: CMD inherits what it would without us (MPI's PMI_FD)
            child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, close_fds=False)
        except OSError as e:   # no such program: the rank fails as a shell's would
            err.write(f"bigraph-emu: cannot start {command[0]!r}: {e.strerror}\n".encode())
            return _exit(127, start)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda s, _f: child.send_signal(s))
        code = child.wait()
    return _exit(code if code >= 0 else 128 - code, start)


def _exit(code: int, start: float) -> int:
    with open("exit.json.tmp", "w") as f:
        used = resource.getrusage(resource.RUSAGE_CHILDREN)   # CMD and what it waited for
        json.dump({"exit_code": code, "start": start, "end": time.monotonic(),
                   "cpu_s": round(used.ru_utime + used.ru_stime, 3)}, f)
    os.replace("exit.json.tmp", "exit.json")
    return code


if __name__ == "__main__":
    sys.exit(main())
