"""Open vSwitch's CPU a second against its main loop's poll nodes (one per port per
wake-up) and packets received, from persecond-*.txt: fitted on the halving-doubling
and the ring, checked on the ring with two connections and the all-to-all."""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PORTS = 96   # bigraph:m=8,n=8: 64 host ports and 16 switch links' 32
RUNS = ("hd", "ring", "ring2", "a2a")


def seconds(name: str) -> np.ndarray:
    """Rows t, cpu, poll nodes/s, packets/s of the seconds that carried traffic."""
    rows = [list(map(float, line.split())) for line in open(os.path.join(HERE, f"persecond-{name}.txt"))
            if len(line.split()) == 4]
    return np.array([r for r in rows if r[3] > 1000])


def main() -> None:
    data = {n: seconds(n) for n in RUNS}
    for n, d in data.items():
        wakeups = d[:, 2].mean() / PORTS
        print(f"{n:6} {len(d):3d} s: Open vSwitch {d[:, 1].mean():.2f} of a core, {d[:, 3].mean():5.0f} packets/s, "
              f"{wakeups:4.0f} wake-ups/s, {d[:, 3].mean() / wakeups:4.1f} packets a wake-up")
    for const in (False, True):
        fitted = np.vstack([data["hd"], data["ring"]])
        cols = (lambda d: np.c_[d[:, 2], d[:, 3], np.ones(len(d))]) if const else (lambda d: np.c_[d[:, 2], d[:, 3]])
        coef, *_ = np.linalg.lstsq(cols(fitted), fitted[:, 1], rcond=None)
        print(f"fit on hd and ring: {coef[0] * 1e6:.2f} us a poll node, {coef[1] * 1e6:.1f} us a packet"
              + (f", {coef[2]:.2f} of a core at any traffic" if const else ""))
        for n, d in data.items():
            print(f"  {n:6} measured {d[:, 1].mean():.2f}, predicted {(cols(d) @ coef).mean():.2f}")


if __name__ == "__main__":
    main()
