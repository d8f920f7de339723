"""Legends on prediction pictures and on ``data show``'s contact sheet."""

from __future__ import annotations

import numpy as np
import pytest

from sapiens2.models import visualize as vis


def _has_colour(panel: np.ndarray, rgb, tol: int = 0) -> bool:
    return bool((np.abs(panel.astype(int) - np.asarray(rgb, int)).max(axis=-1) <= tol).any())


def test_seg_picture_has_the_29_class_legend_with_shares():
    image = np.full((200, 120, 3), 128, np.uint8)
    labels = np.zeros((200, 120), np.uint8)
    labels[:50] = 4
    labels[50:100, :60] = 22
    picture = vis.draw_seg(image, labels)
    assert picture.shape[0] == 200 and picture.shape[1] > 2 * 120 + 4
    panel = picture[:, 2 * 120 + 4:]
    for c in vis.seg_palette():
        assert _has_colour(panel, c), f"class colour {c.tolist()} missing from the legend"
    names = [n for n, _ in vis.seg_legend_entries(labels)]
    assert names[4] == "Hair 25.0%" and names[22] == "Torso 12.5%" and names[0] == "Background 62.5%"
    assert names[1] == "Apparel"  # absent classes are listed without a share


def test_depth_picture_has_a_colour_bar():
    from matplotlib import colormaps

    from sapiens2.models.legends import DEPTH_CMAP

    z = np.tile(np.linspace(1.0, 3.0, 90)[:, None], (1, 60))
    points = np.stack([np.zeros_like(z), np.zeros_like(z), z])
    picture = vis.draw_depth(np.zeros((90, 60, 3), np.uint8), points)
    panel = picture[:, 2 * 60 + 4:]
    assert panel.shape[1] > 10
    for t in (0.0, 1.0):  # both ends of the colour map appear in the bar
        end = (np.asarray(colormaps[DEPTH_CMAP](t)[:3]) * 255).astype(int)
        assert _has_colour(panel, end, tol=16)


def test_normal_picture_has_the_colour_key():
    normals = np.zeros((3, 80, 50), np.float32)
    normals[2] = 1
    picture = vis.draw_normal(np.zeros((80, 50, 3), np.uint8), normals)
    panel = picture[:, 2 * 50 + 4:]
    for rgb in ((255, 127, 127), (0, 127, 127), (127, 255, 127), (127, 127, 255)):
        assert _has_colour(panel, rgb, tol=1), rgb


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    from sapiens2.datasets.synth import generate_split

    return generate_split(tmp_path_factory.mktemp("show") / "s", n=2, size=(96, 72), seed=0, progress=False)


def test_contact_sheet_raw_column_and_legends(split, tmp_path):
    from PIL import Image

    from sapiens2.datasets.io import read_rgb
    from sapiens2.datasets.show import COLUMNS, _resize, contact_sheet
    from sapiens2.datasets.split import open_split

    assert COLUMNS[0] == "image"
    png = contact_sheet(split, tmp_path / "sheet.png", n=2, tile_height=96)
    sheet = np.asarray(Image.open(png).convert("RGB"))
    assert sheet.shape[0] > 24 + 2 * 96  # a legend footer below the rows
    first = open_split(split, "seg").records[0]["image"]
    raw = _resize(read_rgb(split / first), 1.0)
    np.testing.assert_array_equal(sheet[24:24 + 96, :72], raw)  # the untouched image, no skeleton
    footer = sheet[24 + 2 * 96:]
    for c in vis.seg_palette():
        assert _has_colour(footer, c), f"class colour {c.tolist()} missing from the footer"
    row = sheet[24:24 + 96]
    # A depth colour bar per row: near-white ticks/labels and the colour map's two ends.
    from matplotlib import colormaps

    from sapiens2.models.legends import DEPTH_CMAP

    for t in (0.0, 1.0):
        end = (np.asarray(colormaps[DEPTH_CMAP](t)[:3]) * 255).astype(int)
        assert _has_colour(row, end, tol=16)


def test_pose_picture_has_a_legend_of_its_link_colours_and_counts():
    from sapiens2.reference import keypoints308

    image = np.full((240, 180, 3), 90, np.uint8)
    rng = np.random.default_rng(0)
    keypoints = rng.uniform(20, 160, (308, 2))
    scores = np.where(np.arange(308) < 100, 0.9, 0.1)  # 100 keypoints drawn
    picture = vis.draw_pose(image, keypoints, scores, bbox=(5, 5, 175, 235))
    assert picture.shape[0] == 240 and picture.shape[1] > 180 + 40
    panel = picture[:, 180:]
    link_colours = {tuple(link["color"]) for link in keypoints308()["skeleton"]}
    entries = dict((c, n) for n, c in vis.pose_legend_entries())
    assert set(entries) == link_colours  # every link colour is explained, nothing else
    for colour in link_colours:
        assert _has_colour(panel, colour), f"link colour {colour} missing from the legend"
    assert entries[(0, 255, 0)].startswith("left arm") and entries[(255, 128, 0)].startswith("right arm")
    assert "forefinger (both hands)" in entries.values()
    bare = vis.draw_pose(image, keypoints, scores, legend=False)
    assert bare.shape == image.shape  # several people are drawn on one picture, then one legend
    two = vis.with_pose_legend(bare, [scores, scores], 0.3, box=False)
    assert two.shape[0] == 240 and two.shape[1] > 180
