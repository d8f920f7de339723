"""Camera-frame surface normals: angular error inside the mask."""

from sapiens2.tasks.spec import Feed, TaskSpec, register_task

ORDER = 2  # place in the display order

SPEC = register_task(TaskSpec(
    name="normal", dataset="NormalDataset", estimator="NormalEstimator", head="NormalHead",
    evaluator="NormalEvaluator", feed=Feed("dense", gt_key="normal", mask_key="mask"),
    prediction_key="normals", headline="normal_mae", visualiser="draw_normal",
    value_kind="normal", hf_class="Sapiens2ForNormalEstimation",
))
