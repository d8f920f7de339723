"""Realistic synthetic people: anny bodies rendered by Mitsuba, every ground truth from one scene.

Optional (the ``realistic`` extra): nothing here is imported by ``sapiens2.datasets.synth`` until a
split is rendered with ``generator="realistic"``.
"""
