"""Bad or unusual input in the public formats gives a clear error naming the file and the record, never a
traceback later: strings in a COCO box or keypoint list, EXIF-rotated photos (annotations are in the
displayed frame, as every reader shows the image), a predicted ignore value in ``eval seg``."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from PIL import Image

from benchmarks.cli.main import main
from sapiens2.datasets.importers import import_dataset
from sapiens2.datasets.io import DatasetError, read_rgb


def _one_image(real_dir, tmp_path, image_id=785):
    src = json.loads((real_dir / "coco" / "test_coco.json").read_text())
    gt = {"images": [im for im in src["images"] if im["id"] == image_id],
          "annotations": [a for a in src["annotations"] if a["image_id"] == image_id],
          "categories": src["categories"]}
    return gt


def test_strings_in_box_or_keypoints_name_the_record(tmp_path, real_dir):
    gt = _one_image(real_dir, tmp_path)
    bad = copy.deepcopy(gt)
    bad["annotations"][0]["bbox"] = [str(v) for v in bad["annotations"][0]["bbox"]]
    path = tmp_path / "a.json"
    path.write_text(json.dumps(bad))
    aid = bad["annotations"][0]["id"]
    msg = rf"a.json: annotations\[0\] \(id {aid}\): 'bbox' .* must hold numbers"
    with pytest.raises(DatasetError, match=msg):
        import_dataset("coco", path, tmp_path / "s1", images=real_dir / "coco")
    bad = copy.deepcopy(gt)
    bad["annotations"][0]["keypoints"][4] = "12.5"
    path.write_text(json.dumps(bad))
    with pytest.raises(DatasetError, match=r"annotations\[0\].*'keypoints' must hold numbers, got '12.5'"):
        import_dataset("coco", path, tmp_path / "s2", images=real_dir / "coco")


def test_exif_rotated_photo_imports_in_its_displayed_frame(tmp_path, real_dir):
    """A photo stored on its side with EXIF Orientation 6, annotated as displayed: imported, and the
    person mask fits the image the readers show; annotated in the stored frame: refused, saying why."""
    gt = _one_image(real_dir, tmp_path)
    shown = Image.open(real_dir / "coco" / gt["images"][0]["file_name"]).convert("RGB")
    stored = shown.transpose(Image.Transpose.ROTATE_90)  # Orientation 6 turns it back 90 deg clockwise
    exif = Image.Exif()
    exif[0x0112] = 6
    photo_dir = tmp_path / "photos"
    photo_dir.mkdir()
    stored.save(photo_dir / gt["images"][0]["file_name"], exif=exif.tobytes(), quality=95)
    assert read_rgb(photo_dir / gt["images"][0]["file_name"]).shape[:2] == (shown.height, shown.width)
    path = tmp_path / "rot.json"
    path.write_text(json.dumps(gt))
    split = import_dataset("coco", path, tmp_path / "ok", images=photo_dir)
    mask = np.asarray(Image.open(split / "seg" / f"{gt['images'][0]['id']}.png"))
    assert mask.shape == (shown.height, shown.width) and (mask == 1).any()
    stored_frame = copy.deepcopy(gt)
    stored_frame["images"][0]["height"], stored_frame["images"][0]["width"] = shown.width, shown.height
    path.write_text(json.dumps(stored_frame))
    with pytest.raises(DatasetError, match=r"EXIF Orientation 6.*displayed frame"):
        import_dataset("coco", path, tmp_path / "bad", images=photo_dir)


def test_eval_seg_names_the_file_and_value_of_a_predicted_ignore_label(tmp_path, capsys):
    for d in ("pred", "gt"):
        (tmp_path / d).mkdir()
    gt = np.zeros((8, 8), np.uint8)
    gt[2:5] = 1
    pred = gt.copy()
    pred[3, 6] = 255
    Image.fromarray(gt).save(tmp_path / "gt" / "a.png")
    Image.fromarray(pred).save(tmp_path / "pred" / "a.png")
    code = main(["eval", "seg", "--pred", str(tmp_path / "pred"), "--gt", str(tmp_path / "gt"),
                 "--label-set", "person2"])
    err = capsys.readouterr().err
    assert code == 1 and "pred/a.png" in err and "value 255" in err and "row 3, column 6" in err
