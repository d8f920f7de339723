"""29-class body-part segmentation: logits or labels against label maps, mIoU."""

from sapiens2.tasks.spec import Feed, TaskSpec, register_task

SPEC = register_task(TaskSpec(
    name="seg",
    dataset="SegDataset",
    estimator="SegEstimator",
    head="SegHead",
    head_predictor="conv_seg",
    official_config_task="seg",
    evaluator="SegEvaluator",
    feed=Feed("labels", gt_key="label"),
    prediction_key="labels",
    headline="mIoU",
    higher_is_better=True,
    visualiser="draw_seg",
    value_kind="labels",
    file_formats={"pred": (".npy", ".png", ".exr"), "gt": (".npy", ".png", ".exr"), "mask": (".npy", ".png")},
    hf_class="Sapiens2ForSemanticSegmentation",
))
