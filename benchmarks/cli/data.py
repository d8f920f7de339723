"""The handlers of ``sapiens2-bench data`` (synth, import, derive, show: ``run_ACTION(args)``), imported only
when the command runs.

Its arguments and help text: :mod:`benchmarks.cli.parsers.data`.
"""

from __future__ import annotations

from benchmarks.embedded_split import split_generator
from sapiens2.datasets.derive import derive_task
from sapiens2.datasets.importers import import_dataset
from sapiens2.datasets.show import contact_sheet, default_sheet_path
from sapiens2.datasets.synth import generate_split, shards
from sapiens2.utils_io import read_json


def _at_least(flag: str, value: int, low: int) -> None:
    """Refuse ``flag value`` below ``low`` before any work, naming the flag."""
    if value < low:
        raise ValueError(f"{flag} {value}: must be at least {low}")


def run_synth(args) -> int:
    """Render a split."""
    for flag, value, low in (("--n", args.n, 1), ("--seed", args.seed, 0), ("--workers", args.workers, 1),
                             ("--size H", args.size[0], 1), ("--size W", args.size[1], 1)):
        _at_least(flag, value, low)
    if args.merge_shards is not None:
        out = shards.merge_shards(args.out, args.merge_shards, overwrite=args.overwrite)
        print(f"merged {args.merge_shards} shards into {out}")
        return 0
    generator = _generator(args)
    if args.shard is not None:
        shard = shards.parse_shard(args.shard)
        out = shards.generate_shard(args.out, args.n, shard, seed=args.seed, size=args.size,
                                    workers=args.workers, generator=generator)
        print(f"wrote shard {shard[0]}/{shard[1]} of {args.n} images to {out}")
        return 0
    out = generate_split(
        args.out, n=args.n, seed=args.seed, size=args.size, workers=args.workers, overwrite=args.overwrite,
        generator=generator,
    )
    print(f"wrote {args.n} images ({args.size[0]}x{args.size[1]}, seed {args.seed}) to {out}")
    return 0


def _generator(args):
    """The writer's ``generator`` argument from the flags (errors name the flag)."""
    settings = split_generator(args.generator, render=args.render, spp=args.spp, people=args.people,
                               scenes=args.scenes)
    if settings is not None:
        settings.check(args.size)
    return settings


def run_import(args) -> int:
    """Import a dataset as a split folder and say what it holds."""
    out = import_dataset(
        args.format, args.src, args.out, images=args.images, keypoints=args.keypoint_set,
        headboxes=args.headboxes, masks=not args.no_masks, labels=args.labels, label_set=args.label_set,
        overwrite=args.overwrite,
    )
    info = read_json(out / "split.json")
    vocab = ", ".join(f"{k} {info[k]}" for k in ("keypoint_set", "label_set") if k in info)
    print(f"wrote {out}: {info['n']} images, tasks {sorted(info['tasks'])} ({vocab})")
    for task, manifest in info["tasks"].items():
        m = read_json(out / manifest)
        n = len(m["annotations"]) if task == "pose" else len(m["records"])
        extra = f", {m['unlabelled_images']} images without a label file left out" if m.get(
            "unlabelled_images") else ""
        print(f"  {task}: {n} {'annotations' if task == 'pose' else 'label maps'}{extra}")
    return 0


def run_derive(args) -> int:
    """Write a task's ground truth into a split and say how many images it covers."""
    path = derive_task(args.dir, args.task, overwrite=args.overwrite)
    print(f"wrote {path}: {len(read_json(path)['records'])} {args.task} records")
    return 0


def run_show(args) -> int:
    """Write the contact sheet."""
    _at_least("--n", args.n, 1)
    _at_least("--tile-height", args.tile_height, 16)
    out = args.out or default_sheet_path(args.dir)
    path = contact_sheet(args.dir, out, n=args.n, tile_height=args.tile_height)
    print(f"wrote {path}")
    return 0
