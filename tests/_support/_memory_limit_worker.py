"""Child of the out-of-memory test: reads a split's seg batches with its address space capped at what it
uses after start-up plus argv[2] MiB, and prints the error it ends with (argv: SPLIT MIB)."""

from __future__ import annotations

import resource
import sys

from benchmarks.probe.data.loader import SceneLoader
from benchmarks.probe.data.source import FolderData
from benchmarks.probe.protocol import ProbeProtocol
from benchmarks.probe.tasks import build_task

if __name__ == "__main__":
    split, headroom = sys.argv[1], int(sys.argv[2])
    p = ProbeProtocol(input_size=(64, 48), holdout_every=3)
    loader = SceneLoader(FolderData(split), {"seg": build_task("seg", p)}, "train", p, batch_size=1)
    with open("/proc/self/status") as fh:
        vm = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + headroom * 2**20, resource.RLIM_INFINITY))
    try:
        for _ in loader.batches(loader.groups[0]):
            pass
    except Exception as e:  # noqa: BLE001 - the test reads which error it was
        print(f"{type(e).__name__}: {e}")
        sys.exit(3)
    print("no error")
