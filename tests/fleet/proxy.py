"""A TCP proxy between a client and PostgreSQL that a test can cut: the network between an
API host and its database, in one process.

``cut_answer(marker)``: the next request containing ``marker`` reaches the server, but its
answer is swallowed and the connection dropped (the write committed; the client cannot
know). ``cut_request(marker)``: the request is dropped before it reaches the server.
``partition()`` / ``heal()``: every connection dropped and new ones refused meanwhile.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class Proxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._armed: tuple[bytes, bool, bool] | None = None  # marker, forward it, then cut all
        self._partitioned = False
        self._open: set[socket.socket] = set()
        self.cuts = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def cut_answer(self, marker: bytes, *, then_partition: bool = False) -> None:
        with self._lock:
            self._armed = (marker, True, then_partition)

    def cut_request(self, marker: bytes) -> None:
        with self._lock:
            self._armed = (marker, False, False)

    def partition(self) -> None:
        with self._lock:
            self._partitioned = True
            sockets, self._open = list(self._open), set()
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def heal(self) -> None:
        with self._lock:
            self._partitioned = False

    def close(self) -> None:
        self.partition()
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                refused = self._partitioned
            if refused:
                client.close()
                continue
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open |= {client, server}
            swallow = threading.Event()
            threading.Thread(target=self._up, args=(client, server, swallow), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, swallow), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, swallow: threading.Event) -> None:
        """Client to server: where a request is matched against the armed marker."""
        while data := _recv(client):
            with self._lock:
                armed = self._armed
                hit = armed is not None and armed[0] in data
                if hit:
                    self._armed = None
                    self.cuts += 1
            if hit and armed is not None and not armed[1]:
                break  # dropped before the server saw it
            if hit and armed is not None:
                swallow.set()
                if armed[2]:
                    with self._lock:
                        self._partitioned = True
            try:
                server.sendall(data)
            except OSError:
                break
        _close(client, server)

    def _down(self, server: socket.socket, client: socket.socket, swallow: threading.Event) -> None:
        while data := _recv(server):
            if swallow.is_set():
                break  # the answer to the marked request: lost with the connection
            try:
                client.sendall(data)
            except OSError:
                break
        _close(client, server)


def _recv(s: socket.socket) -> bytes:
    try:
        return s.recv(65536)
    except OSError:
        return b""


def _close(*sockets: socket.socket) -> None:
    for s in sockets:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            s.close()
