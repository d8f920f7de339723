"""Backbone throughput: images/s of our Sapiens2 (eager and fast attention) and the transformers port.

All variants run on the same weights in one process, interleaved round by round (so host drift hits
them alike): ours with ``fast_attention=False`` (eager, materialised attention matrix) and ``True``
(SDPA, native GQA), and ``transformers``' ``Sapiens2Model`` with its ``sdpa`` and ``eager`` attention.
Ours runs the official bf16 RoPE (the port only has fp32 RoPE), so the printed max|diff| of the
final feature maps against ``ours_fast`` shows that gap plus dtype rounding. CPU-friendly defaults:
0.1B at 512x384, batch 1, 2 warm-up and 5 timed rounds.
On a GPU: ``--device cuda --sizes 1024x768 --batch 8``.

Example:
    OMP_NUM_THREADS=2 python benchmarks/speed/backbone_throughput.py --json throughput.json
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from benchmarks.results import start_measurement, write_measurement
from sapiens2.models.builder import build_model
from sapiens2.models.convert_hf import official_to_hf
from sapiens2.models.hf_config import hf_config_from_official

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line flags (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--archs", default="sapiens2_0.1b", help="comma-separated official arch names")
    p.add_argument("--sizes", default="512x384", help="comma-separated HxW input sizes")
    p.add_argument("--dtypes", default="fp32,bf16", help="comma-separated: fp32, bf16")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--warmup", type=int, default=2, help="untimed rounds")
    p.add_argument("--iters", type=int, default=5, help="timed rounds (each runs every variant once)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (CPU)")
    p.add_argument("--no-hf", action="store_true", help="skip the transformers variants")
    p.add_argument("--json", help="write the results to this file")
    return p.parse_args(argv)


def build_variants(arch: str, dtype: torch.dtype, device: str, with_hf: bool) -> dict:
    """{name: module} for one arch and dtype, all sharing one set of seed-0 weights."""
    torch.manual_seed(0)
    ours = build_model(arch).eval()
    # LayerScale starts at 1e-4; set it to 1 so the attention branch carries weight (speed is unaffected).
    for name, p in ours.named_parameters():
        if name.endswith("attn.gamma.weight"):
            p.data.fill_(1.0)
    ours = ours.to(device=device, dtype=dtype)
    variants = {"ours_eager": (ours, False), "ours_fast": (ours, True)}
    if with_hf:
        from transformers.models.sapiens2 import Sapiens2Model

        cfg = {"type": "Sapiens2", "arch": arch, "img_size": list(ours.img_size)}
        hf_state, _ = official_to_hf(ours.state_dict(), "backbone")
        for impl in ("sdpa", "eager"):
            config = hf_config_from_official(cfg)
            config._attn_implementation = impl
            with torch.device("meta"):
                hf = Sapiens2Model(config)
            hf.load_state_dict(hf_state, strict=True, assign=True)  # shares the tensors with ours
            # inv_freq is a non-persistent buffer, left on the meta device: recompute it as the port does.
            head_dim = config.hidden_size // config.num_attention_heads
            hf.rope_embeddings.inv_freq = 1 / config.rope_theta ** torch.arange(0, 1, 4 / head_dim)
            variants[f"hf_{impl}"] = (hf.eval().to(device=device, dtype=dtype), None)
    return variants


def output_gap(variants: dict, x: torch.Tensor) -> dict:
    """Max abs difference of each variant's final feature map from ``ours_fast`` (same weights)."""
    feats = {}
    with torch.inference_mode():
        for name, (module, fast) in variants.items():
            if fast is not None:
                module.fast_attention = fast
                feats[name] = module(x)[-1].float()
            else:
                tokens = module(x).last_hidden_state[:, 1 + module.config.num_register_tokens:]
                h, w = x.shape[-2] // module.config.patch_size, x.shape[-1] // module.config.patch_size
                feats[name] = tokens.transpose(1, 2).reshape(x.shape[0], -1, h, w).float()
    return {name: (f - feats["ours_fast"]).abs().max().item() for name, f in feats.items()}


def run_once(module, fast, x) -> float:
    """Seconds of one forward (synchronised on CUDA)."""
    if fast is not None:
        module.fast_attention = fast
    if x.is_cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    module(x)
    if x.is_cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main(argv=None) -> int:
    """Measure and print images/s per arch, size, dtype and variant."""
    from tqdm import tqdm

    started = start_measurement()
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    results = []
    for arch in args.archs.split(","):
        for dname in args.dtypes.split(","):
            variants = build_variants(arch, DTYPES[dname], args.device, not args.no_hf)
            for size in args.sizes.split(","):
                h, w = (int(v) for v in size.lower().split("x"))
                x = torch.randn(args.batch, 3, h, w, device=args.device, dtype=DTYPES[dname])
                times = {name: [] for name in variants}
                gap = output_gap(variants, x)
                rounds = args.warmup + args.iters
                with torch.inference_mode():
                    for r in tqdm(range(rounds), desc=f"{arch} {size} {dname}", leave=False):
                        for name, (module, fast) in variants.items():
                            t = run_once(module, fast, x)
                            if r >= args.warmup:
                                times[name].append(t)
                ref = statistics.median(times.get("hf_sdpa") or times["ours_fast"])
                for name, ts in times.items():
                    med = statistics.median(ts)
                    results.append({"arch": arch, "size": size, "dtype": dname, "variant": name,
                                    "batch": args.batch, "median_s": med, "min_s": min(ts), "max_s": max(ts),
                                    "images_per_s": args.batch / med, "speed_vs_ref": ref / med,
                                    "max_abs_diff_vs_ours_fast": gap.get(name)})
            del variants
    ref_name = "hf_sdpa" if not args.no_hf else "ours_fast"
    print(f"{'arch':14} {'size':>9} {'dtype':>5} {'variant':>11} {'img/s':>8} {'median s':>9} "
          f"{'min-max s':>13} {'vs ' + ref_name:>11} {'max|diff|':>10}")
    for r in results:
        print(f"{r['arch']:14} {r['size']:>9} {r['dtype']:>5} {r['variant']:>11} {r['images_per_s']:8.3f} "
              f"{r['median_s']:9.3f} {r['min_s']:6.3f}-{r['max_s']:<6.3f} {r['speed_vs_ref']:11.3f} "
              f"{r['max_abs_diff_vs_ours_fast']:10.3g}")
    print(f"device {args.device}, threads {torch.get_num_threads()}, batch {args.batch}, "
          f"{args.iters} timed rounds after {args.warmup} warm-up, variants interleaved per round")
    if args.json:
        write_measurement(args.json, "backbone forward throughput per arch, size, dtype and variant",
                          {"results": results, "device": args.device, "threads": torch.get_num_threads()},
                          started=started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
