"""Realistic synthetic people: anny bodies, natural poses, clothing and exact labels (needs anny).

:func:`people.sample_people` gives :class:`people.PersonMesh` objects for the renderer. Importing this
package does not import anny; the first body built loads it (see :func:`bodies.anny_model`).
"""
