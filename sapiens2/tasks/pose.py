"""308-keypoint whole-body pose: top-down crops (UDP), heatmaps, COCO keypoint AP."""

from sapiens2.tasks.spec import Feed, TaskSpec, register_task

ORDER = 0  # place in the display order

SPEC = register_task(TaskSpec(
    name="pose", dataset="PoseTopdownDataset", estimator="PoseTopdownEstimator", head="PoseHeatmapHead",
    official_config_task="keypoints308", evaluator="PoseEvaluator", feed=Feed("keypoints", "keypoints_image"),
    # headline EPE: at the probe's 256x192 crops the official AP is nearly binary (docs/probing.md); AP
    # stays in every record and is a summary column beside it
    prediction_key="keypoints", headline="EPE", visualiser="draw_pose",
    value_kind="keypoints", file_formats={"pred": (".json",), "gt": (".json",)},
    hf_class="Sapiens2ForPoseEstimation",
))
