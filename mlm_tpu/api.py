"""The Python API: every stage with keyword arguments, for notebooks and scripts (`from mlm_tpu import ...`).

Each function takes the settings of the command of the same job, named as its flags with
underscores (`vocab_size=2000` for `--vocab-size 2000`; corpus settings such as `builtin_corpus`
or `text_files` included), builds the same typed config the command builds, and calls the same
library code. Bad input raises `mlm_tpu.UserError` with the message the command would print.
TensorFlow loads only when a function needs it.
"""

import dataclasses
from typing import List, Optional, Sequence

from mlm_tpu.configuration import from_keywords


def train_tokenizer(output_dir: str, **settings) -> str:
    """Train a tokenizer (Unigram, or `algorithm="bpe"` / `"wordpiece"`) and save it in `output_dir`
    (`python -m mlm_tpu.tokenizer train`).

    Examples:
        >>> import mlm_tpu
        >>> mlm_tpu.train_tokenizer("runs/api/tokenizer", builtin_corpus="pydoc-topics", vocab_size=2000,
        ...                         overwrite=True)
        'runs/api/tokenizer'
    """
    from mlm_tpu.tokenizer.training import TokenizerTrainingConfig, train_tokenizer as train

    return train(from_keywords(TokenizerTrainingConfig, {"output_dir": output_dir, **settings}))


def extend_tokenizer(output_dir: str, **settings) -> str:
    """Extend a tokenizer (`tokenizer="..."`) with the `num_new_pieces` words of a corpus that save the most pieces
    (or those of `new_pieces_file`), old ids and old encodings kept, and save it in `output_dir` (`python -m
    mlm_tpu.tokenizer extend`); `train_model(..., model_name_or_path=M, tokenizer=output_dir)` then grows M to it.

    Examples:
        >>> mlm_tpu.extend_tokenizer("runs/api/extended", tokenizer="runs/api/tokenizer", builtin_corpus="pydoc-topics",
        ...                          num_new_pieces=20, overwrite=True)
        'runs/api/extended'
    """
    from mlm_tpu.tokenizer.extension import TokenizerExtensionConfig, extend_tokenizer as extend

    return extend(from_keywords(TokenizerExtensionConfig, {"output_dir": output_dir, **settings}))


def shard_corpus(tokenizer: str, output_dir: str, **settings) -> dict:
    """Cut a corpus into count-named TFRecord shards in `output_dir/<split>`; returns the split's manifest
    (`python -m mlm_tpu.shard`).

    Examples:
        >>> manifest = mlm_tpu.shard_corpus("runs/api/tokenizer", "runs/api/shards", builtin_corpus="pydoc-topics",
        ...                                 split="validation", max_length=64, overwrite=True)
        >>> manifest["records"] > 0
        True
    """
    from mlm_tpu.shards.config import ShardingConfig
    from mlm_tpu.shards.sharding import shard_corpus as shard
    from mlm_tpu.tasks import shard_kinds

    return shard(from_keywords(ShardingConfig, {"tokenizer": tokenizer, "output_dir": output_dir, **settings}),
                 shard_kinds())


def train_model(train_dataset: str, output_dir: str, callbacks: Sequence = (), **settings):
    """Train on shards (`python train.py`): returns a TrainingResult (steps, each epoch's figures, the best epoch, and
    a continued pretraining run's figures of its checkpoint before training).

    `callbacks` are Keras callbacks: they get on_train_begin/end, on_epoch_begin/end (with the
    epoch's training and validation figures) and on_train_batch_begin/end around each call to the device.

    Examples:
        >>> result = mlm_tpu.train_model("runs/api/shards/validation", "runs/api/model",
        ...                              tokenizer="runs/api/tokenizer", model_config="tiny", max_steps=5)
        >>> result.steps
        5
    """
    from mlm_tpu.console import import_tensorflow, log, quiet_libraries

    import_tensorflow()
    quiet_libraries()
    from mlm_tpu.tasks import training_task
    from mlm_tpu.tasks import TrainingConfig
    from mlm_tpu.training.trainer import train

    from mlm_tpu.training.recipes import with_recipe

    settings, recipe_lines = with_recipe(settings)  # recipe="dapt": the recipe's settings under those given
    for line in recipe_lines:
        log(line)
    config = from_keywords(TrainingConfig, {"train_dataset": train_dataset, "output_dir": output_dir, **settings})
    return train(config, training_task(config), callbacks)


def evaluate_model(model: str, eval_dataset: str, **settings):
    """Score a trained model on shards (`python -m mlm_tpu.evaluate`): returns an EvaluationResult (task, scores).

    Examples:
        >>> mlm_tpu.evaluate_model("runs/api/model", "runs/api/shards/validation").scores["masked_accuracy"] >= 0
        True
    """
    from mlm_tpu.console import import_tensorflow, quiet_libraries

    import_tensorflow()
    quiet_libraries()
    from mlm_tpu.tasks import plug_in_of_saved_model
    from mlm_tpu.training.config import EvaluationConfig
    from mlm_tpu.training.evaluation import evaluate_model as evaluate

    config = from_keywords(EvaluationConfig, {"model": model, "eval_dataset": eval_dataset, **settings})
    return evaluate(config, plug_in_of_saved_model(model, config.base_model))


def fill_mask(model: str, sentences: Sequence[str], top_k: int = 5,
              base_model: Optional[str] = None) -> List[List[List[dict]]]:
    """For each sentence, for each [MASK] in it, the top-k candidates (`python -m mlm_tpu.predict`).

    Examples:
        >>> best = mlm_tpu.fill_mask("runs/api/model", ["The [MASK] statement raises an exception."], top_k=3)
        >>> len(best[0][0])
        3
    """
    from mlm_tpu.console import quiet_libraries
    from mlm_tpu.mlm.fill_mask import FillMaskConfig, fill_mask as fill
    from mlm_tpu.tasks import saved_model_loader

    quiet_libraries()
    return fill(FillMaskConfig(model, tuple(sentences), top_k, base_model),
                saved_model_loader(model, base_model, "mlm"))


def predict_text2text(model: str, inputs: Sequence[str], **settings) -> List[dict]:
    """A T5 model on texts (`python -m mlm_tpu.predict text2text`): a label and its probabilities for a classifier
    trained here, else generated text; one dict per input."""
    from mlm_tpu.console import quiet_libraries
    from mlm_tpu.t5.prediction import Text2TextPredictionConfig, predict_text2text as predict
    from mlm_tpu.tasks import saved_model_loader

    quiet_libraries()
    config = from_keywords(Text2TextPredictionConfig, {"model": model, "inputs": tuple(inputs), **settings})
    return predict(config, saved_model_loader(model, config.base_model, "t5"))


def predict_text_classification(model: str, texts: Sequence[str], **settings) -> List[dict]:
    """An encoder classifier on texts (`python -m mlm_tpu.predict text-classification`): each text's label and every
    label's probability, or a regression's score; a pair is its two texts separated by a tab."""
    from mlm_tpu.console import quiet_libraries
    from mlm_tpu.encoder.prediction import EncoderPredictionConfig, classify_texts
    from mlm_tpu.tasks import saved_model_loader

    quiet_libraries()
    config = from_keywords(EncoderPredictionConfig, {"model": model, "texts": tuple(texts), **settings})
    return classify_texts(config, saved_model_loader(model, config.base_model, "encoder"))


def predict_token_classification(model: str, texts: Sequence[str], **settings) -> List[dict]:
    """An encoder tagger on texts (`python -m mlm_tpu.predict token-classification`): each word's tag, and the
    entities the tags make."""
    from mlm_tpu.console import quiet_libraries
    from mlm_tpu.encoder.prediction import EncoderPredictionConfig, tag_texts
    from mlm_tpu.tasks import saved_model_loader

    quiet_libraries()
    config = from_keywords(EncoderPredictionConfig, {"model": model, "texts": tuple(texts), **settings})
    return tag_texts(config, saved_model_loader(model, config.base_model, "encoder"))


def fine_tune(train_dataset: str, eval_dataset: str, output_dir: str, *, model_name_or_path: Optional[str] = None,
              seed: int = 42, protocol=None, callbacks: Sequence = (), **settings):
    """Fine-tune an encoder on a task's shards and score it on its validation shards, under one fixed protocol
    (`FineTuningProtocol`, GLUE-sane's defaults: 5 epochs, lr 4e-5, batch 16, length 128, the last epoch kept);
    returns a FineTuningResult (the kept epoch's validation scores, and every epoch's). The task is the shards' kind
    (sequence- or token-classification); `model_name_or_path` None with `model_config` and `tokenizer` trains the same
    head from scratch, the baseline. `settings` are further training settings (they override the protocol's). A run
    started as a subprocess (`mlm-tpu train --config`, the protocol's `training_settings()` as the file) that kept
    its best epoch (`keep_epoch="best"`) gives the same result through `FineTuningResult.of_folder(output_dir)`.
    README: "Fine-tune an encoder" has a worked example; tests/test_encoder.py runs this function on each task.
    """
    from mlm_tpu.downstream.fine_tune import fine_tune as run

    return run(train_dataset, eval_dataset, output_dir, model_name_or_path=model_name_or_path, seed=seed,
               protocol=protocol, callbacks=callbacks, **settings)


def downstream_benchmark(model: str, **settings) -> dict:
    """Judge a pretrained encoder on tasks (`mlm-tpu downstream`): each seed fine-tunes a fresh copy of `model` on
    each task under one protocol (`protocol=FineTuningProtocol(...)`, GLUE-sane's defaults); returns the report, per
    task the median and spread (min-max) over seeds of the model's dev score, and of the baselines' (`baseline=
    ("scratch", "tfidf")`), as results.json keeps it. Runs finished earlier in `output_dir` are read back. README:
    "Judge a pretrained encoder" shows the tasks and the report; tests/test_downstream.py runs it.
    """
    from mlm_tpu.console import import_tensorflow, quiet_libraries

    import_tensorflow()
    quiet_libraries()
    from mlm_tpu.downstream.benchmark import DownstreamConfig, run_benchmark

    protocol = settings.pop("protocol", None)
    config = from_keywords(DownstreamConfig, {"model": model, **settings})
    return run_benchmark(dataclasses.replace(config, protocol=protocol) if protocol else config)


def export_model(model: str, **settings) -> str:
    """Add PyTorch-layout weights (model.safetensors) and a model card to a TensorFlow model folder, into
    `output_dir` or in place, and push it with `hub_model_id` (`python -m mlm_tpu.export`); returns the folder.
    With `merge=True`, `model` is a LoRA or IA3 adapter folder, folded into its base (or `base_model`) and written
    whole into `output_dir`.

    Examples:
        >>> mlm_tpu.export_model("runs/api/model", output_dir="runs/api/exported", overwrite=True)
        'runs/api/exported'
    """
    from mlm_tpu.console import import_tensorflow, quiet_libraries

    import_tensorflow()
    quiet_libraries()
    from mlm_tpu.model_folder.export import ExportConfig
    from mlm_tpu.tasks import export_saved_model

    return export_saved_model(from_keywords(ExportConfig, {"model": model, **settings}))


def plot_loss(run_dir: str, output: Optional[str] = None, overwrite: bool = False) -> str:
    """Draw a run's training and validation loss into a PNG (default: run_dir/loss.png, the run's own plot, redrawn
    as the trainer draws it; replacing an earlier plot elsewhere takes `overwrite`); returns its path.

    Examples:
        >>> mlm_tpu.plot_loss("runs/api/model")
        'runs/api/model/loss.png'
    """
    import os

    from mlm_tpu.model_folder.card import LOSS_PLOT
    from mlm_tpu.training.loss_plot import plot_losses

    output = output or os.path.join(run_dir, LOSS_PLOT)
    plot_losses(run_dir, output, overwrite)
    return output
