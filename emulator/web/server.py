"""The live web page's server: the page, its data as server-sent events,
the replay of a results folder, and that folder's files, read-only.

Why the standard library: one page with a few files, data that flow one
way (the run to the page) ten times a second, and a handful of viewers.
http.server in a thread with server-sent events does all of it; a
framework or WebSockets would add a dependency to every install (the run
machine, the VM) and nothing the page needs. EventSource reconnects by
itself, and a page that opens late gets what was kept (the fabric, the
finished calls, the story) before the live samples.

`with WebView(host, port) as web:` binds the port at once (a port in use
is a SpecError: exit 2, before anything else is built) and serves until the
block ends; `web.publish(message)` is safe from any thread (the monitor's).
"""
from __future__ import annotations

import errno
import functools
import http.server
import json
import os
import queue
import threading
import time
import urllib.parse

from emulator.spec.experiment import SpecError

STATIC = os.path.join(os.path.dirname(__file__), "static")
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".png": "image/png", ".svg": "image/svg+xml",
         ".pdf": "application/pdf", ".csv": "text/csv; charset=utf-8", ".txt": "text/plain; charset=utf-8",
         ".json": "application/json", ".jsonl": "text/plain; charset=utf-8", ".log": "text/plain; charset=utf-8"}
KEEPALIVE_S = 15     # a comment line this often, so a dead viewer is noticed
CLIENT_BACKLOG = 64  # messages queued per viewer; a viewer that lags loses the oldest samples
MAX_VIEWERS = 32


class WebView:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, folder: str | None = None):
        self.folder = folder          # the results folder served under /results/ and replayed
        self._kept: list[tuple[str, str]] = []   # (type, JSON) of every message but samples, for late viewers
        self._viewers: set[queue.Queue] = set()
        self._lock = threading.Lock()
        try:
            self._httpd = http.server.ThreadingHTTPServer((host, port), functools.partial(_Handler, self))
        except OSError as e:
            raise SpecError(_bind_error(host, port, e)) from None
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="web-view", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}/"

    def __enter__(self) -> "WebView":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            for q in self._viewers:
                _put(q, None)   # each event stream ends
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def publish(self, message: dict) -> None:
        """Send to every viewer; keep it for later viewers unless it is a sample."""
        data = json.dumps(message, separators=(",", ":"))
        with self._lock:
            if message["type"] == "fabric":   # a run on a new fabric: late viewers need only that one
                self._kept = [kept for kept in self._kept if kept[0] != "fabric"]
            if message["type"] != "sample":
                self._kept.append((message["type"], data))
            for q in self._viewers:
                _put(q, data)

    def serve_until_interrupted(self) -> None:
        """Block until Ctrl-C, SIGTERM or a hang-up; then return normally."""
        from emulator.net import interrupts
        try:
            while True:
                time.sleep(3600)
        except (KeyboardInterrupt, interrupts.Interrupted):
            pass

    def _subscribe(self) -> queue.Queue | None:
        with self._lock:
            q: queue.Queue = queue.Queue(len(self._kept) + CLIENT_BACKLOG)
            if len(self._viewers) >= MAX_VIEWERS:
                return None
            for _, data in self._kept:
                _put(q, data)
            self._viewers.add(q)
        return q

    def _unsubscribe(self, q: queue.Queue) -> None:
        with self._lock:
            self._viewers.discard(q)


def _bind_error(host: str, port: int, e: OSError) -> str:
    if e.errno == errno.EADDRINUSE:
        return (f"--web-port {port}: the port is in use on {host}; choose another, or leave --web-port out "
                "for a free one")
    if e.errno == errno.EACCES:
        return f"--web-port {port}: not allowed to listen on it (ports below 1024 need root); choose another"
    return f"--web-host {host}: cannot listen there ({e.strerror or e}); give an address of this machine"


def _put(q: queue.Queue, data) -> None:
    """Queue without blocking the publisher: a full queue drops its oldest message."""
    while True:
        try:
            q.put_nowait(data)
            return
        except queue.Full:
            try:
                q.get_nowait()
            except queue.Empty:
                pass


class _Handler(http.server.BaseHTTPRequestHandler):
    """GET only: the page, /events, /api/replay, /results/NAME."""

    def __init__(self, web: WebView, *args, **kwargs):
        self.web = web
        super().__init__(*args, **kwargs)

    def log_message(self, *args) -> None:   # the run's terminal output stays the run's
        pass

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        path, query = url.path, urllib.parse.parse_qs(url.query)
        if path in ("/", "/index.html"):
            self._file(os.path.join(STATIC, "index.html"))
        elif path.startswith("/static/") and path[len("/static/"):] in os.listdir(STATIC):
            self._file(os.path.join(STATIC, path[len("/static/"):]))
        elif path == "/favicon.ico":   # none: say so without an error in the browser's console
            self.send_response(204)
            self.end_headers()
        elif path == "/events":
            self._events()
        elif path == "/api/replay":
            self._replay(query)
        elif path.startswith("/results/"):
            self._result(urllib.parse.unquote(path[len("/results/"):]))
        else:
            self.send_error(404)

    def _send(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self._common_headers()
        self.end_headers()
        self.wfile.write(body)

    def _common_headers(self) -> None:
        # nothing but this server's own files: the page works offline and leaks nothing
        self.send_header("Content-Security-Policy", "default-src 'self'")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")

    def _file(self, path: str) -> None:
        with open(path, "rb") as f:
            self._send(f.read(), TYPES.get(os.path.splitext(path)[1].lower(), "application/octet-stream"))

    def _result(self, name: str) -> None:
        """A file directly in the results folder, by its plain name."""
        folder = self.web.folder
        if not folder or not name or "/" in name or name.startswith("."):
            return self.send_error(404)
        path = os.path.join(folder, name)
        if not os.path.isfile(path) or os.path.dirname(os.path.realpath(path)) != os.path.realpath(folder):
            return self.send_error(404)
        self._file(path)

    def _replay(self, query: dict) -> None:
        """Without run and call: the calls links.csv holds; with them, that call's frames."""
        from emulator.web import view
        try:
            if not self.web.folder:
                raise ValueError("no results folder yet")
            if "call" in query:
                body = view.folder_frames(self.web.folder, int(query.get("run", ["0"])[0]), int(query["call"][0]))
            else:
                body = view.folder_calls(self.web.folder)
        except (ValueError, OSError) as e:   # also TableError: a damaged or half-written links.csv
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps({"error": str(e)}).encode())
            return
        self._send(json.dumps(body, separators=(",", ":")).encode(), "application/json")

    def _events(self) -> None:
        q = self.web._subscribe()
        if q is None:
            return self.send_error(503, "too many viewers")
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self._common_headers()
            self.end_headers()
            while True:
                try:
                    data = q.get(timeout=KEEPALIVE_S)
                except queue.Empty:
                    self.wfile.write(b": keep-alive\n\n")
                    continue
                if data is None:
                    return
                self.wfile.write(b"data: " + data.encode() + b"\n\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            self.web._unsubscribe(q)
