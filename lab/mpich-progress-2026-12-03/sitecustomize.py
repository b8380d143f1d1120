"""Experiment only (not the project's), on PYTHONPATH: per MPI rank, pin it
to a core (BG_PIN) or renice it (BG_NICE), and record its CPU seconds
against its wall seconds at exit, into BG_CPU_DIR."""
import atexit
import os
import time

_rank = os.environ.get("PMI_RANK")


def _done():
    t = os.times()
    path = os.path.join(os.environ.get("BG_CPU_DIR", "/tmp/mpiexp"), f"rank{_rank}-{os.getpid()}.txt")
    with open(path, "w") as f:
        f.write(f"{_rank} {os.getpid()} cpu {t.user + t.system:.2f} wall {time.monotonic() - _t0:.2f}\n")


if _rank is not None:
    if os.environ.get("BG_PIN"):
        os.sched_setaffinity(0, {int(_rank) % os.cpu_count()})
    if os.environ.get("BG_NICE"):
        os.nice(int(os.environ["BG_NICE"]))
    _t0 = time.monotonic()
    atexit.register(_done)
