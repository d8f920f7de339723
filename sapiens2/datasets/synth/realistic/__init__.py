"""Realistic synthetic people: anny bodies rendered by Mitsuba, every ground truth from one scene.

:func:`people.sample_people` gives :class:`people.PersonMesh` objects (natural poses, clothing, exact
labels); :func:`sample.realistic_sample` composes a scene around them (camera, occluders, lighting)
and renders the image and the ground truth (:mod:`.render`). Optional (the ``realistic`` extra):
importing this package imports neither anny nor mitsuba; the first body built or image rendered does.
"""
