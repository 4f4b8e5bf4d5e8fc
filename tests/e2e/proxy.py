"""A TCP proxy between the browser and the hub, so a test can drop or refuse connections.

This is a real network fault as the page sees it: open sockets are closed under it (`cut`), new
ones are refused (`block`), or bytes stop flowing without a close (`freeze`), which is how a frame
the browser wrote can be lost on the way.
"""

import select
import socket
import threading
import time


class TcpProxy:
    def __init__(self, target_port: int, host: str = "127.0.0.1"):
        self.target = (host, target_port)
        self.listener = socket.create_server((host, 0))
        self.port = self.listener.getsockname()[1]
        self.blocked = False
        self.frozen = False
        self.closing = False
        self.lock = threading.Lock()
        self.pairs: set[tuple[socket.socket, socket.socket]] = set()
        threading.Thread(target=self._accept, name="e2e-proxy", daemon=True).start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self.closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.blocked:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            pair = (client, upstream)
            with self.lock:
                self.pairs.add(pair)
            threading.Thread(target=self._pump, args=(client, upstream, pair), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, pair), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, pair) -> None:
        try:
            while not self.closing:
                if self.frozen:
                    time.sleep(0.02)
                    continue
                ready, _, _ = select.select([source], [], [], 0.1)
                if not ready or self.frozen:  # frozen while waiting: leave the bytes unread
                    continue
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except (OSError, ValueError):  # ValueError: the other side closed the socket under select()
            pass
        finally:
            self._close(pair)

    def _close(self, pair) -> None:
        with self.lock:
            self.pairs.discard(pair)
        for sock in pair:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def cut(self) -> int:
        """Close every open connection (both ends); returns how many were cut."""
        with self.lock:
            pairs = list(self.pairs)
        for pair in pairs:
            self._close(pair)
        return len(pairs)

    def block(self, on: bool = True) -> None:
        """Refuse new connections (accept and close at once) while on."""
        self.blocked = on

    def freeze(self, on: bool = True) -> None:
        """Stop moving bytes either way, without closing anything."""
        self.frozen = on

    def close(self) -> None:
        self.closing = True
        self.listener.close()
        self.cut()
