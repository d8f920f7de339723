"""Worker for the 2-process probe test: run under torchrun (or plainly for the 1-process reference)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _probe_toy import make_toy_data  # noqa: E402

from benchmarks.probe.api import RunOptions, run_probe  # noqa: E402
from benchmarks.probe.protocol import quick_protocol  # noqa: E402
from sapiens2 import distributed as dist_utils  # noqa: E402


def main(out: str, backbone: str, tasks: str, decoder: str = "pixelshuffle") -> None:
    protocol = quick_protocol().replace(iterations=12, batch_size=4, max_train_samples=8, max_test_samples=5)
    if decoder == "linear":  # the streamed spine: batches of 2 scenes, so both ranks stream a shard
        protocol = protocol.replace(tasks={t: {"decoder": "linear"} for t in tasks.split(",")})
    data = make_toy_data(n_train=8, n_test=5, size=(64, 48))
    with dist_utils.process_group("cpu"):
        paths = run_probe(backbone, tasks, data, out, seeds=(0,), protocol=protocol,
                          options=RunOptions(batch_size=2))
        if dist_utils.is_main():
            summary = {str(p): json.loads(Path(p).read_text())["metrics"] for p in paths}
            Path(out, "summary.json").write_text(json.dumps(summary))


if __name__ == "__main__":
    main(*sys.argv[1:5])
