"""Accesses per operation of a real server, from valgrind lackey's `--trace-mem=yes` output
traced with `--trace-syscalls=yes`: the server's replies (writes and sends on the
connections it accepted) cut the trace into operations, and a cache line counts as part of
the store when few operations touch it (the stack, the event loop's state, the query and
reply buffers are touched by nearly every operation and stay cached at any store size;
an item's lines and its hash bucket are touched only by the operations on its key).

Lackey sees user space only: a value the kernel copies out of the store (memcached's
sendmsg from the item itself) is not in the trace."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

LINE = 64
PAGE = 4096
#: Syscall numbers (x86-64) of the calls that answer a client, and of accept.
SENDS = {1, 20, 44, 46}  # write, writev, sendto, sendmsg
ACCEPTS = {43, 288}  # accept, accept4

_SYSCALL = re.compile(r"^SYSCALL\[\d+,\d+\]\((\d+)\) sys_\w+ \( (\d+)")
_RESULT = re.compile(
    r"^SYSCALL\[\d+,\d+\]\((\d+)\) .*--> (?:\[async\] --> )?Success\(0x([0-9a-f]+)\)"
)


@dataclass(frozen=True)
class OpStats:
    """What the traced operations touched. `store_lines` is the mean of distinct store
    lines per operation (lines touched by at most `shared_share` of the operations),
    `store_pages` the 4 KiB pages they lie on, `store_runs` the runs of adjacent lines
    they form (separate allocations: a chain of dependent loads when each is found through
    the one before), `shared_lines` the lines touched by more operations, `data_accesses`
    the mean loads and stores per operation."""

    ops: int
    data_accesses: float
    store_lines: float
    store_pages: float
    store_runs: float
    shared_lines: int
    store_footprint_pages: int


def split_ops(lines: Iterable[str], skip: int, count: int) -> tuple[list[set[int]], list[int]]:
    """The distinct cache lines of each operation's data loads and stores, and how many
    accesses it made (a modify counts as a load and a store): the accesses between one
    reply and the next, on connections the server accepted. The first `skip` replies (the
    load phase) are passed over; at most `count` operations are returned."""
    clients: set[int] = set()
    ops: list[set[int]] = []
    accesses: list[int] = []
    replies = made = 0
    current: set[int] = set()
    for line in lines:
        c = line[:1]
        if c == " ":
            if replies >= skip and line[1:2] in ("L", "S", "M"):
                addr = int(line[3 : line.index(",", 3)], 16)
                current.add(addr // LINE)
                made += 2 if line[1] == "M" else 1
            continue
        if c != "S" or not line.startswith("SYSCALL["):
            continue
        m = _RESULT.match(line)
        if m and int(m.group(1)) in ACCEPTS:
            clients.add(int(m.group(2), 16))
            continue
        m = _SYSCALL.match(line)
        if m and int(m.group(1)) in SENDS and int(m.group(2)) in clients:
            replies += 1
            if replies > skip:
                ops.append(current)
                accesses.append(made)
                if len(ops) == count:
                    break
            current = set()
            made = 0
    return ops, accesses


def op_stats(ops: list[set[int]], accesses: list[int], shared_share: float = 0.05) -> OpStats:
    """Store lines per operation and their spread (see OpStats)."""
    if not ops:
        raise ValueError("no operations in the trace (were replies seen?)")
    touched: dict[int, int] = {}
    for op in ops:
        for ln in op:
            touched[ln] = touched.get(ln, 0) + 1
    limit = max(1.0, shared_share * len(ops))
    shared = {ln for ln, n in touched.items() if n > limit}
    lines = pages = runs = 0
    footprint: set[int] = set()
    for op in ops:
        store = sorted(op - shared)
        lines += len(store)
        pg = {ln * LINE // PAGE for ln in store}
        pages += len(pg)
        footprint |= pg
        runs += sum(1 for i, ln in enumerate(store) if i == 0 or store[i - 1] != ln - 1)
    n = len(ops)
    return OpStats(
        ops=n,
        data_accesses=sum(accesses) / n,
        store_lines=lines / n,
        store_pages=pages / n,
        store_runs=runs / n,
        shared_lines=len(shared),
        store_footprint_pages=len(footprint),
    )
