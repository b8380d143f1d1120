"""A TCP echo pair inside two emulated hosts: what crossing the fabric
costs one message (emulator.calibration.measure_switch_latency).

    python -m emulator.measure.pingpong serve PORT
    python -m emulator.measure.pingpong ask IP PORT SIZES COUNT GAP_S   -> JSON {size: [round trips in s]}

The asker sends SIZE bytes, the server sends them back; each round trip is
timed alone, GAP_S apart (the links' token buckets refill in between, as
they do between a collective's steps).
"""
import json
import socket
import sys
import time

PORT = 5301


def _exactly(conn: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("peer closed")
        data += chunk
    return bytes(data)


def serve(port: int) -> None:
    with socket.create_server(("", port)) as server:
        conn, _ = server.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn:
            while True:
                try:
                    size = int.from_bytes(_exactly(conn, 4), "big")
                except ConnectionError:
                    return
                conn.sendall(_exactly(conn, size))


def ask(ip: str, port: int, sizes: list[int], count: int, gap_s: float) -> dict:
    conn = socket.create_connection((ip, port), timeout=10)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    out = {}
    with conn:
        for size in sizes:
            payload = bytes(size)
            out[size] = []
            for _ in range(count):
                time.sleep(gap_s)
                t0 = time.perf_counter()
                conn.sendall(size.to_bytes(4, "big") + payload)
                _exactly(conn, size)
                out[size].append(time.perf_counter() - t0)
    return out


def round_trips(network, fabric, src: str, dst: str, sizes: list[int], count: int, gap_s: float) -> dict[int, list[float]]:
    """{size: round trips} of messages from host `src` to `dst` and back,
    on an emulated network (emulator.net.network.EmulatedFabric) that is up."""
    from emulator.net import processes
    server = network.host(dst).popen([sys.executable, "-m", "emulator.measure.pingpong", "serve", str(PORT)])
    processes.record(server.pid)
    try:
        time.sleep(0.5)
        asker = network.host(src).popen([sys.executable, "-m", "emulator.measure.pingpong", "ask", fabric.host(dst).ip,
                                         str(PORT), ",".join(map(str, sizes)), str(count), str(gap_s)])
        processes.record(asker.pid)
        out, err = asker.communicate(timeout=60 + count * len(sizes) * (gap_s + 0.1))
        if asker.returncode:
            raise RuntimeError(f"pingpong from {src} to {dst}: {err.decode()[-300:]}")
        return {int(k): v for k, v in json.loads(out).items()}
    finally:
        if server.poll() is None:
            processes.stop_pid(server.pid)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
    else:
        ip, port, sizes, count, gap = sys.argv[2:7]
        print(json.dumps(ask(ip, int(port), [int(s) for s in sizes.split(",")], int(count), float(gap))))
