"""What the layout says once: the masking settings (one dataclass, which training's task settings, evaluation and
inspection all take), and the words of the tasks (declared in the registry, from which `--task`'s help, the tasks'
table in tasks.py and in the README are made)."""

import dataclasses

from conftest import REPO_ROOT


def test_evaluation_and_inspection_take_the_masking_fields_from_the_one_masking_dataclass():
    """Their fields were written out again in each (with other comments, and ranges to keep in step by hand)."""
    from mlm_tpu.mlm.settings import MaskedLmSettings
    from mlm_tpu.training.config import EvaluationConfig
    from mlm_tpu.training.inspection import InspectionConfig
    from mlm_tpu.training.settings import MaskingSettings

    masking = {field.name: field for field in dataclasses.fields(MaskingSettings)}
    for config in (EvaluationConfig, InspectionConfig, MaskedLmSettings):
        assert issubclass(config, MaskingSettings), config
        assert not set(masking) & set(vars(config).get("__annotations__", {})), f"{config.__name__} repeats them"
        fields = {field.name: field for field in dataclasses.fields(config)}
        assert all(fields[name].metadata == field.metadata for name, field in masking.items()), config
    # their own fields still come first, by position
    assert EvaluationConfig("model", "shards", masking="span").eval_dataset == "shards"
    assert InspectionConfig("split", "tokenizer", 2).num_examples == 2
