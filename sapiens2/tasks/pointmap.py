"""Camera-frame pointmaps, compared in canonical coordinates (focal length 768) as the official evaluator."""

from sapiens2.tasks.spec import Feed, TaskSpec, register_task

ORDER = 3  # place in the display order

SPEC = register_task(TaskSpec(
    name="pointmap", dataset="PointmapDataset", estimator="PointmapEstimator", head="PointmapHead",
    evaluator="PointmapEvaluator", feed=Feed("dense", gt_key="pointmap_canonical", mask_key="mask"),
    prediction_key="pointmap_canonical", headline="l2_mean", visualiser="draw_depth",
    value_kind="float", hf_class="Sapiens2ForPointmapEstimation",
    file_formats={"pred": (".npy", ".exr"), "gt": (".npy", ".exr"), "mask": (".npy", ".png")},
))
