"""One TCP flow through one HTB class (htb_overdraw.sh): messages of each size, each after the bucket refilled,
and when each arrived whole, against what 50 Mbit/s with a 62,500-byte burst allows. Times on CLOCK_MONOTONIC,
which both namespaces share.

    htb_overdraw.py recv
    htb_overdraw.py send CONGESTION_CONTROL
"""
import socket
import sys
import time

SIZES = [31250, 62500, 80000, 95000, 125000, 200000]
REPS = 5
ADDRESS = ("10.99.0.2", 23999)
WARM_UP = 300000   # opens the congestion window


def receive() -> None:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(ADDRESS)
    listener.listen(1)
    conn, _ = listener.accept()

    def exact(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            buf += conn.recv(n - len(buf))
        return buf
    exact(WARM_UP)
    for size in SIZES * REPS:
        exact(size)
        done = time.monotonic()
        sent = float(exact(32).decode())
        print(f"{size:7d} bytes in {1e3 * (done - sent):6.2f} ms; at 50 Mbit/s beyond the 62,500-byte burst: "
              f"{max(0, size - 62500) * 8 / 50e6 * 1e3:5.2f} ms", flush=True)
        conn.sendall(b"k")


def send(congestion_control: str) -> None:
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, congestion_control.encode())
    s.connect(ADDRESS)
    s.sendall(b"x" * WARM_UP)
    time.sleep(0.3)
    for size in SIZES * REPS:
        time.sleep(0.1)   # the bucket refills
        start = time.monotonic()
        s.sendall(b"y" * size)
        s.sendall(f"{start:<32.6f}".encode()[:32])
        s.recv(1)


if __name__ == "__main__":
    receive() if sys.argv[1] == "recv" else send(sys.argv[2])
