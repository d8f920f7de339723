"""29-class body-part segmentation: logits or labels against label maps, mIoU."""

from sapiens2.tasks.spec import Feed, TaskSpec, register_task

ORDER = 1  # place in the display order

SPEC = register_task(TaskSpec(
    name="seg", dataset="SegDataset", estimator="SegEstimator", head="SegHead", evaluator="SegEvaluator",
    feed=Feed("labels", gt_key="label"), prediction_key="labels", headline="mIoU",
    visualiser="draw_seg", value_kind="labels", hf_class="Sapiens2ForSemanticSegmentation",
))
