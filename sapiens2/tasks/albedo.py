"""Diffuse albedo in [0, 1]: MAE, PSNR, SSIM inside the mask (no Hugging Face port: ``hf_class`` None)."""

from sapiens2.tasks.spec import Feed, TaskSpec, register_task

ORDER = 4  # place in the display order

SPEC = register_task(TaskSpec(
    name="albedo", dataset="AlbedoDataset", estimator="AlbedoEstimator", head="AlbedoHead",
    evaluator="AlbedoEvaluator", feed=Feed("dense", gt_key="albedo", mask_key="mask"),
    prediction_key="albedo", headline="mae", visualiser="draw_albedo",
    value_kind="unit",
))
