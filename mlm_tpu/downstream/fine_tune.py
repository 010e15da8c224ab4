"""One fine-tuning run under the fixed protocol (`mlm_tpu.fine_tune`, and each run of the benchmark): the encoder
fine-tuned on a task's shards by the trainer, scored on its validation shards."""

from typing import Optional, Sequence

from mlm_tpu.configuration import check_ranges, from_keywords
from mlm_tpu.console import import_tensorflow, quiet_libraries
from mlm_tpu.encoder.fine_tuning import FineTuningProtocol, FineTuningResult
from mlm_tpu.encoder.shard_kinds import SEQUENCE_CLASSIFICATION_ROWS, TOKEN_CLASSIFICATION_ROWS
from mlm_tpu.errors import UserError
from mlm_tpu.shards.reading import find_shards


def fine_tune(train_dataset: str, eval_dataset: str, output_dir: str, *, model_name_or_path: Optional[str] = None,
              seed: int = 42, protocol: Optional[FineTuningProtocol] = None, callbacks: Sequence = (),
              **settings) -> FineTuningResult:
    """The run's result (its kept epoch's validation scores: the last, or with keep_epoch best the best); the task is
    the shards' kind, `settings` further training settings, named as the flags (they override the protocol's). See
    `mlm_tpu.api.fine_tune`."""
    protocol = protocol or FineTuningProtocol()
    check_ranges(protocol)
    protocol.check()
    from mlm_tpu.tasks import TrainingConfig, shard_kinds, training_task

    kind = find_shards(train_dataset, shard_kinds(), None, None, "--train-dataset").kind
    if kind not in (SEQUENCE_CLASSIFICATION_ROWS, TOKEN_CLASSIFICATION_ROWS):
        raise UserError(f"--train-dataset {train_dataset} holds {kind.name} shards; fine-tuning takes "
                        "sequence-classification or token-classification shards")
    import_tensorflow()
    quiet_libraries()
    from mlm_tpu.training.trainer import train

    config = from_keywords(TrainingConfig, {**protocol.training_settings(), "task": kind.name,
                                            "eval_dataset": eval_dataset,
                                            "model_name_or_path": model_name_or_path, "seed": seed, **settings,
                                            "train_dataset": train_dataset, "output_dir": output_dir})
    return FineTuningResult.of_training(train(config, training_task(config), callbacks), kind.name, seed)
