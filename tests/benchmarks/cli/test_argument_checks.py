"""Arguments checked before any work: image sizes (patch multiples, a stated maximum) and the pose box
padding; each error names the flag and the value."""

from __future__ import annotations

import pytest

from benchmarks.cli.main import main


def test_convert_refuses_an_img_size_that_is_not_a_patch_multiple(tmp_path, capsys):
    # the input does not even exist: the size is checked first
    out = tmp_path / "hf"
    assert main(["convert", str(tmp_path / "nope.safetensors"), str(out), "--to", "hf",
                 "--img-size", "65x47"]) == 1
    err = capsys.readouterr().err
    assert "--img-size '65x47'" in err and "multiples of the patch size 16" in err and "64x32 or 80x48" in err
    assert not out.exists()


@pytest.mark.parametrize("size, why", [("160000x160000", "each side must be in 1..8192"),
                                       ("0x48", "each side must be in 1..8192"),
                                       ("70x48", "multiples of the patch size 16")])
def test_predict_refuses_a_bad_input_size_before_any_work(size, why, tmp_path, capsys):
    out = tmp_path / "pred"
    code = main(["predict", str(tmp_path / "no_image.jpg"), "--task", "seg", "--random-weights",
                 "--arch", "sapiens2_0.4b", "--input-size", size, "--out", str(out)])
    assert code == 1
    err = capsys.readouterr().err
    assert f"--input-size '{size}'" in err and why in err and not out.exists()


@pytest.mark.parametrize("padding", ["-1", "0", "nan"])
def test_predict_refuses_a_non_positive_bbox_padding(padding, tmp_path, capsys):
    out = tmp_path / "pred"
    code = main(["predict", str(tmp_path / "no_image.jpg"), "--task", "pose", "--random-weights",
                 "--arch", "sapiens2_0.4b", "--bbox", "0,0,10,10", "--bbox-padding", padding,
                 "--out", str(out)])
    assert code == 1
    assert f"--bbox-padding {float(padding)}: must be a positive factor" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("seeds, why", [("a,b", "expected comma-separated integers"),
                                        ("0,0", r"seed\(s\) \[0\] given twice"),
                                        (",", "no seed given")])
def test_probe_seeds_are_checked_before_any_work(seeds, why, tmp_path, capsys):
    import re

    out = tmp_path / "o"
    assert main(["probe", "--backbone", "pixels", "--tasks", "seg", "--data", str(tmp_path / "never_read"),
                 "--out", str(out), "--seeds", seeds]) == 1
    err = capsys.readouterr().err
    assert f"--seeds {seeds!r}" in err and re.search(why, err) and not out.exists()


def test_run_probe_refuses_repeated_seeds_before_training(tmp_path):
    from benchmarks.probe.api import run_probe

    with pytest.raises(ValueError, match="given twice"):
        run_probe("pixels", ["seg"], tmp_path / "never_read", tmp_path / "o", seeds=(0, 0), protocol="quick")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("argv, why", [
    (["data", "show", "SPLIT", "--n", "0"], "--n 0: must be at least 1"),
    (["data", "synth", "--out", "OUT", "--seed=-1"], "--seed -1: must be at least 0"),
    (["data", "synth", "--out", "OUT", "--n", "0"], "--n 0: must be at least 1"),
    (["eval", "seg", "--pred", "P", "--gt", "G", "--num-classes", "-5"],
     "--num-classes -5: must be at least 1"),
])
def test_counts_and_seeds_name_their_flag(argv, why, tmp_path, capsys):
    argv = [str(tmp_path / a) if a in ("SPLIT", "OUT", "P", "G") else a for a in argv]
    assert main(argv) == 1
    assert why in capsys.readouterr().err
    assert not (tmp_path / "OUT").exists()


@pytest.mark.parametrize("seeds, why", [("a,b", "expected comma-separated integers"),
                                        ("0,0", r"seed\(s\) \[0\] given twice")])
def test_run_seeds_name_their_flag_before_any_work(seeds, why, tmp_path, capsys):
    import re

    out = tmp_path / "o"
    assert main(["run", "--quick", "--data", str(tmp_path / "never_read"), "--out", str(out),
                 "--seeds", seeds]) == 1
    err = capsys.readouterr().err
    assert f"--seeds {seeds!r}" in err and re.search(why, err) and not out.exists()


@pytest.mark.parametrize("override, why", [
    ({"lr": "fast"}, "protocol.lr: expected a finite number, got 'fast'"),
    ({"iterations": 2.5}, "protocol.iterations: expected an integer, got 2.5"),
    ({"cls_concat": 1}, "protocol.cls_concat: expected true or false, got 1"),
    ({"tasks": {"pose": {"sigma": "wide"}}},
     "protocol.tasks['pose'].sigma: expected a finite number, got 'wide'"),
])
def test_a_probe_protocol_setting_of_the_wrong_type_is_named_before_any_work(override, why, tmp_path, capsys):
    import json

    (tmp_path / "p.json").write_text(json.dumps(override))
    out = tmp_path / "o"
    assert main(["probe", "--backbone", "pixels", "--tasks", "seg", "--quick", "--data", str(tmp_path / "no"),
                 "--protocol", str(tmp_path / "p.json"), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert why in err and "most likely a bug" not in err and not out.exists()
