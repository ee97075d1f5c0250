"""A TCP proxy on loopback that holds every chunk for a while before passing it on, each way: a
PostgreSQL server "across a network" on one machine, where `tc netem` is not available.

    python benches/delay_proxy.py LISTEN_PORT SERVER_PORT [--delay 0.00025]

Point a store at `postgresql://user@127.0.0.1:LISTEN_PORT/db`: each round trip then waits about
twice the delay, plus the proxy's own thread hand-offs (about 0.9 ms a round trip in all with
the default, measured over a replay of LoCoMo conv-30). Used to compare round trips a call makes
(`docs/design/storage.md`, "Pipelined transactions"); a figure taken through it compares code
on the same proxy, not a network's latency.
"""

from __future__ import annotations

import argparse
import socket
import threading
import time


def _pipe(src: socket.socket, dst: socket.socket, delay: float) -> None:
    try:
        while data := src.recv(65536):
            time.sleep(delay)
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("listen_port", type=int)
    ap.add_argument("server_port", type=int)
    ap.add_argument("--delay", type=float, default=0.00025, help="seconds, each way")
    args = ap.parse_args()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", args.listen_port))
    server.listen(64)
    while True:
        client, _ = server.accept()
        upstream = socket.create_connection(("127.0.0.1", args.server_port))
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pipe, args=(a, b, args.delay), daemon=True).start()


if __name__ == "__main__":
    main()
