"""Training under a strategy: masked-LM pretraining from scratch, or T5 fine-tuning (the head decides).

`train(args)` does what the 🤗 TPU language-modeling example does (shards -> batches -> model
under a strategy -> `create_optimizer` -> `model.fit`), plus: a resumable backup in the output
folder, an accuracy that ignores unscored positions, validation each epoch, and `save_pretrained`
of model and tokenizer at each epoch's end (or of the best epoch, when the head scores epochs).
What differs between RoBERTa pretraining and T5 fine-tuning lives in heads.py and t5/head.py.
"""

import argparse
import json
import math
import os
import sys
from pathlib import Path

import tensorflow as tf
import tf_keras as keras
import transformers
from transformers import create_optimizer

from mlm_tpu.callbacks import PushSavedToHub, SavePretrained, StopAtStep
from mlm_tpu.cli import log
from mlm_tpu.data import ShardSet, distributed_dataset, find_corrupt_shard, find_shards
from mlm_tpu.errors import UserError, reason_of
from mlm_tpu.hardware_flags import wants_bf16
from mlm_tpu.heads import Head, MaskedLmHead
from mlm_tpu.metrics import MaskedAccuracy
from mlm_tpu.sharding.packing import MIN_MAX_LENGTH
from mlm_tpu.strategy import describe, select_strategy

TRAINING_INFO_FILE = "training_args.json"


def make_head(args: argparse.Namespace) -> Head:
    if args.head == "t5":
        from mlm_tpu.t5.head import T5Head  # the T5 modules load only when used

        return T5Head()
    return MaskedLmHead()


def check_arguments(args: argparse.Namespace) -> None:
    for flag, value, minimum in (("--per-replica-batch-size", args.per_replica_batch_size, 1),
                                 ("--num-epochs", args.num_epochs, 1), ("--steps-per-execution", args.steps_per_execution, 1),
                                 ("--cpu-replicas", args.cpu_replicas, 1)):
        if value < minimum:
            raise UserError(f"{flag} must be at least {minimum}, not {value}")
    for flag, value, minimum in (("--max-steps", args.max_steps, 1), ("--logging-steps", args.logging_steps, 1),
                                 ("--backup-steps", args.backup_steps, 1), ("--max-length", args.max_length, MIN_MAX_LENGTH),
                                 ("--max-target-length", args.max_target_length, 2)):
        if value is not None and value < minimum:
            raise UserError(f"{flag} must be at least {minimum}, not {value}")
    if args.mlm_probability is not None and not 0 < args.mlm_probability < 1:
        raise UserError(f"--mlm-probability must be between 0 and 1, not {args.mlm_probability}")
    if args.output_dir.startswith("gs://"):
        raise UserError("--output-dir must be a local folder (the backup and save_pretrained write there); "
                        "push the result with --hub-model-id or copy it to gs:// afterwards")


def plan_steps(shards: ShardSet, global_batch: int, num_epochs: int, max_steps) -> tuple:
    """(steps per epoch, epochs, total steps) from the shard counts and the global batch."""
    steps_per_epoch = shards.records // global_batch
    if steps_per_epoch == 0:
        raise UserError(f"--train-dataset has {shards.records} examples, fewer than one global batch of "
                        f"{global_batch}; lower --per-replica-batch-size or shard more text")
    total = max_steps or steps_per_epoch * num_epochs
    steps_per_epoch = min(steps_per_epoch, total)
    return steps_per_epoch, math.ceil(total / steps_per_epoch), total


def compile_for_training(model, accuracy_name: str, learning_rate: float, total_steps: int, warmup_steps: int,
                         weight_decay_rate: float, steps_per_execution: int, jit_compile: bool):
    """Give the model its AdamW (warmup, then linear decay) and compile it with the model's own loss."""
    model.build_in_name_scope()  # weights exist before fit, so BackupAndRestore can restore into them
    optimizer, _ = create_optimizer(init_lr=learning_rate, num_train_steps=total_steps,
                                    num_warmup_steps=warmup_steps, weight_decay_rate=weight_decay_rate)
    model.compile(optimizer=optimizer, metrics=[MaskedAccuracy(name=accuracy_name)],
                  steps_per_execution=steps_per_execution, jit_compile=jit_compile)
    return model


def hub_callback(output_dir: str, hub_model_id: str) -> PushSavedToHub:
    """The push callback, made first: it clones the Hub repo into the (still empty) output folder.

    The backup is kept out of the repo; the saved model, tokenizer and TensorBoard logs go in.
    """
    try:
        callback = PushSavedToHub(output_dir=output_dir, hub_model_id=hub_model_id)
    except Exception as error:  # unreachable Hub, no login, a folder that is not a clone of the repo
        raise UserError(f"cannot set up pushing to the Hub repo '{hub_model_id}' ({reason_of(error)}); log in with "
                        "`huggingface-cli login`, and give an empty --output-dir (or the repo's clone)") from None
    ignore = Path(output_dir) / ".gitignore"
    kept_out = ignore.read_text(encoding="utf-8") if ignore.exists() else ""
    if "backup/" not in kept_out.splitlines():
        ignore.write_text(kept_out + ("\n" if kept_out and not kept_out.endswith("\n") else "") + "backup/\n",
                          encoding="utf-8")
    return callback


def make_callbacks(args: argparse.Namespace, tokenizer, total_steps: int, validation: list, best_metric, push) -> list:
    """Backup first (the others see the restored step), validation scores before the saving that compares them."""
    callbacks = [
        keras.callbacks.BackupAndRestore(os.path.join(args.output_dir, "backup"),
                                         save_freq=args.backup_steps or "epoch"),
        StopAtStep(total_steps),
        *validation,
        SavePretrained(args.output_dir, tokenizer, best_metric),
        keras.callbacks.TensorBoard(os.path.join(args.output_dir, "logs"), update_freq=args.logging_steps or "epoch"),
    ]
    return callbacks + ([push] if push else [])


def train(args: argparse.Namespace) -> keras.callbacks.History:
    """Run the whole training job described by the command-line flags."""
    head = make_head(args)
    check_arguments(args)
    head.check_arguments(args)
    transformers.logging.set_verbosity_error()  # its TensorFlow deprecation notice is not news to our users
    keras.utils.set_random_seed(args.seed)
    strategy = select_strategy(args.tpu, args.tpu_zone, args.gcp_project, args.cpu_replicas)
    if wants_bf16(args):
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    tokenizer = head.load_tokenizer(args)
    train_shards = find_shards(args.train_dataset, head.features(args), "--train-dataset")
    eval_shards = find_shards(args.eval_dataset, head.features(args), "--eval-dataset") if args.eval_dataset else None
    if eval_shards and eval_shards.features != train_shards.features:
        raise UserError(f"--eval-dataset holds examples of other lengths ({eval_shards.features}) than --train-dataset "
                        f"({train_shards.features}); shard both with the same --max-length")
    head.prepare(args, tokenizer, train_shards, eval_shards)
    global_batch = args.per_replica_batch_size * strategy.num_replicas_in_sync
    steps_per_epoch, epochs, total_steps = plan_steps(train_shards, global_batch, args.num_epochs, args.max_steps)
    push = hub_callback(args.output_dir, args.hub_model_id) if args.hub_model_id else None
    log(f"Training on {describe(strategy)}: global batch {global_batch} = {args.per_replica_batch_size} per "
        f"replica x {strategy.num_replicas_in_sync}; {train_shards.records:,} examples in {len(train_shards.files)} "
        f"shards -> {steps_per_epoch} steps per epoch, {total_steps} steps in all")
    os.makedirs(args.output_dir, exist_ok=True)
    with open(os.path.join(args.output_dir, TRAINING_INFO_FILE), "w", encoding="utf-8") as stream:
        json.dump({**vars(args), "replicas": strategy.num_replicas_in_sync, "global_batch_size": global_batch,
                   "steps_per_epoch": steps_per_epoch, "total_steps": total_steps}, stream, indent=2)

    with strategy.scope():
        model = compile_for_training(head.build_model(args, tokenizer, train_shards), head.accuracy_name,
                                     args.learning_rate, total_steps, int(total_steps * args.warmup_ratio),
                                     args.weight_decay_rate, args.steps_per_execution, jit_compile=args.tpu is not None)

    def datasets_for(shards, shuffle, repeat):
        return distributed_dataset(strategy, shards, args.per_replica_batch_size, head.make_transform(args, tokenizer),
                                   shuffle=shuffle, seed=args.seed, shuffle_buffer_size=args.shuffle_buffer_size,
                                   repeat=repeat)

    validation, validation_callbacks = {}, []
    if eval_shards:
        validation_steps = eval_shards.records // global_batch
        if validation_steps == 0:
            raise UserError(f"--eval-dataset has {eval_shards.records} examples, fewer than one global batch "
                            f"of {global_batch}")
        validation = {"validation_data": datasets_for(eval_shards, shuffle=False, repeat=False),
                      "validation_steps": validation_steps}
        validation_callbacks = head.validation_callbacks(args, strategy, model, eval_shards)
    best_metric = head.best_metric(args) if eval_shards else None
    callbacks = make_callbacks(args, tokenizer, total_steps, validation_callbacks, best_metric, push)
    try:
        return model.fit(datasets_for(train_shards, shuffle=True, repeat=True), epochs=epochs,
                         steps_per_epoch=steps_per_epoch, callbacks=callbacks,
                         verbose=1 if sys.stdout.isatty() else 2, **validation)
    except tf.errors.DataLossError:
        problem = find_corrupt_shard(train_shards) or (eval_shards and find_corrupt_shard(eval_shards))
        raise UserError(problem or "a shard is corrupt (TensorFlow reported data loss); re-shard the data") from None
