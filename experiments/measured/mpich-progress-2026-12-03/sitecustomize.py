# Experiment only (not the project's): per MPI rank, pin to a core when
# BG_PIN is set, and record CPU seconds against wall seconds at exit.
import atexit, os, time
_rank = os.environ.get("PMI_RANK")
if _rank is not None:
    if os.environ.get("BG_PIN"):
        os.sched_setaffinity(0, {int(_rank) % os.cpu_count()})
    if os.environ.get("BG_NICE"):
        os.nice(int(os.environ["BG_NICE"]))
    _t0 = time.monotonic()
    def _done():
        t = os.times()
        with open(os.path.join(os.environ.get("BG_CPU_DIR", "/tmp/mpiexp"), f"rank{_rank}-{os.getpid()}.txt"), "w") as f:
            f.write(f"{_rank} {os.getpid()} cpu {t.user + t.system:.2f} wall {time.monotonic() - _t0:.2f}\n")
    atexit.register(_done)
