"""Debian's redis-server and memcached, started natively on a loopback port, and the CPU
time they spend (utime + stime of every thread, from /proc/PID/stat)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

#: The programs each server needs, by Debian package (what `make measure-apps` installs).
PACKAGES = {
    "redis-server": "redis-server",
    "redis-benchmark": "redis-tools",
    "memcached": "memcached",
    "valgrind": "valgrind",
    "gcc": "gcc",
}


def missing(*programs: str) -> list[str]:
    """The programs of `programs` not on PATH, each with the package that has it."""
    return [f"{p} (package {PACKAGES.get(p, p)})" for p in programs if shutil.which(p) is None]


@dataclass(frozen=True)
class ServerSpec:
    """One server: `kind` is `redis` or `memcached`; `protocol` the wire protocol the load
    generator speaks to it (`resp` or `memcache`)."""

    kind: str
    port: int
    max_value: int = 8 << 20
    memory_mib: int = 2048
    max_conns: int = 1024

    @property
    def protocol(self) -> str:
        return "resp" if self.kind == "redis" else "memcache"

    def argv(self) -> list[str]:
        if self.kind == "redis":
            # No persistence: a snapshot or the append-only file would add their own CPU.
            return [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--protected-mode",
                "no",
                "--loglevel",
                "warning",
            ]
        if self.kind == "memcached":
            # One worker thread: under valgrind the threads run one at a time anyway, and
            # natively one worker keeps the 2-core host's client and server apart. -I raises
            # the item size limit for the paper's 5 MB values.
            return [
                "memcached",
                "-p",
                str(self.port),
                "-l",
                "127.0.0.1",
                "-U",
                "0",
                "-t",
                "1",
                "-m",
                str(self.memory_mib),
                "-I",
                f"{self.max_value >> 20}m",
                "-c",
                str(self.max_conns),
                "-u",
                "root",
            ]
        raise ValueError(f"unknown server kind {self.kind!r}")


class Server:
    """A running server; stops it on exit from a `with` block."""

    def __init__(
        self,
        spec: ServerSpec,
        prefix: list[str] | None = None,
        ready_timeout: float = 10.0,
        preexec: Callable[[], None] | None = None,
    ) -> None:
        self.spec = spec
        self.proc = subprocess.Popen(
            [*(prefix or []), *spec.argv()],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=preexec,
        )
        deadline = time.monotonic() + ready_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{spec.kind} exited with {self.proc.returncode} at start")
            try:
                with socket.create_connection(("127.0.0.1", spec.port), timeout=1.0):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"{spec.kind} did not listen on {spec.port}") from None
                time.sleep(0.05)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu_ns(self) -> int:
        """CPU time of the whole process so far (every thread), in nanoseconds."""
        return process_cpu_ns(self.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def process_cpu_ns(pid: int) -> int:
    """utime + stime of `pid` (all its threads) from /proc/PID/stat, in nanoseconds. The
    fields count clock ticks (usually 100 a second): measure over seconds, not
    milliseconds."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    # The command name may hold spaces; the fields after its closing parenthesis do not.
    fields = stat[stat.rindex(")") + 2 :].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of proc(5)
    return ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
