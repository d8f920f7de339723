"""Runners of sapiens2-bench: probing, paper-table reproduction, reference systems, the CLI.

The top layer: it imports ``leaderboard``, ``evaluators`` and ``sapiens2``; nothing imports it.
Speed and memory scripts live in ``benchmarks/speed/``.
"""
