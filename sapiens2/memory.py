"""How much memory this process can still use: the one place the readers and ``pretrain`` ask.

On Linux the figure is ``MemAvailable`` from ``/proc/meminfo`` (what the kernel can hand out without
swapping), lowered to a cgroup's memory limit when the process runs under one (a container or a
``systemd-run -p MemoryMax=...`` slice) and to the address-space limit (``ulimit -v``) less what the
process has mapped. Elsewhere it is ``os.sysconf`` available pages times the page
size. ``None`` when nothing can be read: callers then skip their check rather than guess.

Example:
    >>> n = available_memory()
    >>> n is None or n > 0
    True
    >>> format_bytes(3 * 2**30)
    '3.0 GiB'
"""

from __future__ import annotations

import os
from pathlib import Path

# (limit, usage, stat file, the stat's reclaimable page-cache key): cgroup v2, then v1. The usage
# counts the page cache, so its inactive part is taken off (the "working set" of docker and kubelet).
_CGROUP_FILES = (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current",
                  "/sys/fs/cgroup/memory.stat", "inactive_file"),
                 ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                  "/sys/fs/cgroup/memory/memory.usage_in_bytes",
                  "/sys/fs/cgroup/memory/memory.stat", "total_inactive_file"))


def format_bytes(n: int | float) -> str:
    """``n`` bytes as GiB (or MiB below 1 GiB) with one decimal."""
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # the file counts kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def _stat_value(path: str, key: str) -> int:
    try:
        for line in Path(path).read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _cgroup_headroom() -> int | None:
    for limit_file, usage_file, stat_file, cache_key in _CGROUP_FILES:
        try:
            limit = Path(limit_file).read_text().strip()
            usage = int(Path(usage_file).read_text().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 2**60:  # "max" or a huge v1 value: no limit
            working_set = max(0, usage - _stat_value(stat_file, cache_key))
            return max(0, int(limit) - working_set)
    return None


def _rlimit_headroom() -> int | None:
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY:
            return None
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return max(0, soft - int(line.split()[1]) * 1024)
    except (ImportError, OSError, ValueError, IndexError):
        return None
    return None


def available_memory() -> int | None:
    """Bytes of memory this process can still allocate without swapping, or ``None`` when unknown."""
    found = _meminfo_available()
    if found is None:
        try:
            found = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            found = None
    for headroom in (_cgroup_headroom(), _rlimit_headroom()):
        if headroom is not None:
            found = headroom if found is None else min(found, headroom)
    return found


# Reading /proc/meminfo and the cgroup files costs about 0.3 ms; the readers ask once per decoded file
# (thousands of times per probe), where a file needing under this many bytes could not be refused
# on memory grounds short of a machine that is failing anyway.
CHECK_ABOVE_BYTES = 64 * 2**20


def available_memory_for(need: int) -> int | None:
    """:func:`available_memory` when ``need`` (bytes) is over :data:`CHECK_ABOVE_BYTES`, else None."""
    return available_memory() if need > CHECK_ABOVE_BYTES else None
