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


def test_the_readme_and_task_help_say_what_the_registry_declares():
    """The README's table of tasks is task_table() and `train --task`'s help is task_help(), both made from the
    registry's words; hand-written, they said "from scratch" of tasks that also continue a checkpoint."""
    from mlm_tpu.cli.train import build_parser
    from mlm_tpu.tasks import TASKS, task_help, task_table

    assert task_table() in (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert all(f"| `{task}`" in task_table() for task in TASKS)
    assert build_parser()._option_string_actions["--task"].help == task_help()


def test_the_tasks_declared_as_pretraining_are_those_whose_plug_ins_continue_a_checkpoint():
    """TaskWords.pretrains (what the tables say: from scratch, or continuing --model-name-or-path) is the plug-in's
    validates_before_training, and every task starts from --model-name-or-path as the tables say."""
    from mlm_tpu.tasks import STARTS, TASKS_DECLARED, make_task

    for name, declared in TASKS_DECLARED.items():
        plug_in = make_task(name)
        assert declared.words.pretrains == plug_in.validates_before_training, name
        assert plug_in.takes_pretrained_weights and "--model-name-or-path" in STARTS[declared.words.pretrains], name
