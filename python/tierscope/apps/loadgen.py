"""A small closed-loop load generator for Redis (RESP) and memcached (text protocol): the
mixes memtier_benchmark and YCSB run, which Debian packages no client for. Each
connection has one request outstanding (memtier's and redis-benchmark's default pipeline
of 1), keys are drawn per connection from a seeded generator, values are one fixed
buffer (no allocation per request). Throughput here is bounded by Python on a 2-core
host; the server's CPU time per operation, what the application model needs, is not."""

from __future__ import annotations

import random
import socket
import threading
import time
from dataclasses import dataclass

#: Mixes as (share of SETs, description): memtier's default SET:GET ratio is 1:10; YCSB's
#: workload B reads 95 % and updates 5 % (an update of a whole item is a SET here).
MIXES = {
    "memtier": (1.0 / 11.0, "memtier_benchmark's default --ratio 1:10 (SET:GET)"),
    "ycsb-b": (0.05, "YCSB workload B: 95 % reads, 5 % updates"),
    "ycsb-a": (0.5, "YCSB workload A: 50 % reads, 50 % updates"),
    "get": (0.0, "GETs only"),
    "set": (1.0, "SETs only"),
}


@dataclass(frozen=True)
class Load:
    """What to send: `keys` keys of `value_size` bytes, `mix` (MIXES), keys drawn
    `uniform`ly, `gaussian` (memtier's G: centred, `stddev` a share of the keys) or
    `hotspot` (`hot_ops` of the requests on the first `hot_data` of the keys)."""

    keys: int
    value_size: int
    mix: str = "get"
    distribution: str = "uniform"
    stddev: float = 1.0 / 6.0
    hot_data: float = 0.01
    hot_ops: float = 0.99
    connections: int = 4
    seed: int = 1


def key_name(i: int) -> bytes:
    return b"key:%012d" % i


def draw_key(rng: random.Random, load: Load) -> int:
    if load.distribution == "uniform":
        return rng.randrange(load.keys)
    if load.distribution == "gaussian":
        k = int(rng.gauss(load.keys / 2.0, load.stddev * load.keys))
        return min(max(k, 0), load.keys - 1)
    if load.distribution == "hotspot":
        hot = max(1, int(load.hot_data * load.keys))
        if rng.random() < load.hot_ops or hot == load.keys:
            return rng.randrange(hot)
        return rng.randrange(hot, load.keys)
    raise ValueError(f"unknown key distribution {load.distribution!r}")


def request(protocol: str, op: str, key: bytes, value: bytes) -> list[bytes]:
    """The request's bytes, as parts (the value is not copied into a new buffer)."""
    if protocol == "resp":
        if op == "get":
            return [b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(key), key)]
        return [
            b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n" % (len(key), key, len(value)),
            value,
            b"\r\n",
        ]
    if op == "get":
        return [b"get %s\r\n" % key]
    return [b"set %s 0 0 %d\r\n" % (key, len(value)), value, b"\r\n"]


def reply_length(protocol: str, buf: bytearray) -> int | None:
    """The length of the complete reply at the start of `buf`, or None if more is needed.
    Errors from the server raise."""
    end = buf.find(b"\r\n")
    if end < 0:
        return None
    head = bytes(buf[:end])
    if protocol == "resp":
        if head[:1] in (b"+", b":"):
            return end + 2
        if head[:1] == b"$":
            n = int(head[1:])
            total = end + 2 if n < 0 else end + 2 + n + 2
            return total if len(buf) >= total else None
        raise RuntimeError(f"redis answered {head!r}")
    if head in (b"STORED", b"END"):
        return end + 2
    if head.startswith(b"VALUE "):
        n = int(head.split()[3])
        total = end + 2 + n + 2 + 5  # data, CRLF, "END\r\n"
        return total if len(buf) >= total else None
    raise RuntimeError(f"memcached answered {head!r}")


def _send(sock: socket.socket, parts: list[bytes]) -> None:
    if len(parts) == 1:
        sock.sendall(parts[0])
    else:
        sock.sendmsg(parts) if sum(map(len, parts)) < 65536 else [sock.sendall(p) for p in parts]


def _roundtrip(sock: socket.socket, protocol: str, parts: list[bytes], buf: bytearray) -> None:
    _send(sock, parts)
    while (n := reply_length(protocol, buf)) is None:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise RuntimeError("the server closed the connection")
        buf += chunk
    del buf[:n]


def fill(port: int, protocol: str, load: Load) -> None:
    """SETs every key once, in key order (as the key-value model's load phase)."""
    value = b"v" * load.value_size
    with socket.create_connection(("127.0.0.1", port)) as sock:
        buf = bytearray()
        for i in range(load.keys):
            _roundtrip(sock, protocol, request(protocol, "set", key_name(i), value), buf)


def run(port: int, protocol: str, load: Load, seconds: float = 0.0, ops: int = 0) -> int:
    """Runs `load` for `seconds` of wall time, or until `ops` requests (over all
    connections) are answered; returns the requests answered."""
    set_share = MIXES[load.mix][0]
    value = b"v" * load.value_size
    deadline = time.monotonic() + seconds if seconds > 0 else float("inf")
    per_conn = -(-ops // load.connections) if ops > 0 else 0
    done = [0] * load.connections
    errors: list[BaseException] = []

    def worker(c: int) -> None:
        rng = random.Random(load.seed * 1_000_003 + c)
        try:
            with socket.create_connection(("127.0.0.1", port)) as sock:
                buf = bytearray()
                while (per_conn == 0 or done[c] < per_conn) and time.monotonic() < deadline:
                    op = "set" if rng.random() < set_share else "get"
                    key = key_name(draw_key(rng, load))
                    _roundtrip(sock, protocol, request(protocol, op, key, value), buf)
                    done[c] += 1
        except BaseException as e:  # re-raised in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(c,)) for c in range(load.connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return sum(done)
