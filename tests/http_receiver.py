"""A real HTTP receiver for the webhook tests: ``http.server`` in a thread on 127.0.0.1
with an ephemeral port, answering from a script and recording every request."""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"ok"
    hold: float = 0.0  # seconds to wait (on the receiver's release event) first


class Receiver:
    """Answers POSTs from a queue of scripted answers (then ``default``)."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.answers: deque[Answer] = deque()
        self.default = Answer()
        self.release = threading.Event()  # ends every hold at teardown
        self.on_request: list[str] | None = None  # a shared event log, if a test wants
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with receiver._lock:
                    receiver.requests.append(
                        Received("POST", self.path, dict(self.headers.items()), body)
                    )
                    if receiver.on_request is not None:
                        receiver.on_request.append("request")
                    answer = (
                        receiver.answers.popleft()
                        if receiver.answers
                        else receiver.default
                    )
                if answer.hold:
                    receiver.release.wait(answer.hold)
                try:
                    self.send_response(answer.status)
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(answer.body)))
                    self.end_headers()
                    self.wfile.write(answer.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the sender gave up waiting (a timeout test)

            def log_message(self, format: str, *args: object) -> None:
                pass  # keep the test output quiet

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever,
            kwargs={"poll_interval": 0.02},
            daemon=True,
        )

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def answer(self, *answers: Answer) -> None:
        with self._lock:
            self.answers.extend(answers)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def serving() -> Iterator[Receiver]:
    """A started receiver, stopped (its held answers released) when the block ends."""
    server = Receiver()
    server.start()
    try:
        yield server
    finally:
        server.stop()
