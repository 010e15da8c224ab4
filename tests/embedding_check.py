"""The contrastive loss and gradients of one batch, made four ways, in one process: one pass on one device (the
reference), GradCache on one device, one pass on 2 replicas (negatives gathered across them) and GradCache on 2
replicas.

Run by tests/test_embedding.py as `python embedding_check.py SHARDS TOKENIZER` (a sentence-embedding split and its
tokenizer). The CPU is split into 2 logical devices first. Each way runs the task plug-in's own training_outputs and
loss_weights, weighted and summed over replicas as training/step.py does, on the same tiny RoBERTa's weights and the
split's first 8 rows. Prints one JSON line: for each way, its loss and the largest absolute difference of its loss
and of its gradients from the reference's.
"""

import json
import sys

import numpy as np

ROWS, MINI_BATCH = 8, 3


def main(shards: str, tokenizer_folder: str) -> None:
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from mlm_tpu.embedding.encoder import TextEmbedder, encoder_from_scratch
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.tasks import TrainingConfig, make_task
    from mlm_tpu.tokenizer.load import load_tokenizer

    tokenizer = load_tokenizer(tokenizer_folder, "--tokenizer")
    task = make_task("sentence-embedding")
    split = find_shards(shards, task.shard_kinds, task.shard_kind, task.features(None, None))
    schema = {name: tf.io.FixedLenFeature([length], tf.int64) for name, length in split.features.items()}
    records = next(iter(tf.data.TFRecordDataset(split.files).batch(ROWS)))
    batch = {name: tf.cast(values, tf.int32) for name, values in tf.io.parse_example(records, schema).items()}
    tf.keras.utils.set_random_seed(0)
    reference_model = encoder_from_scratch("tiny", tokenizer, split.length, None)
    reference_model.build_in_name_scope()
    weights = reference_model.get_weights()

    def config(grad_cache):
        return TrainingConfig("t", "o", task="sentence-embedding", grad_cache_mini_batch_size=grad_cache,
                              symmetric_loss=True)

    def loss_and_gradients(strategy, grad_cache):
        with strategy.scope():
            model = encoder_from_scratch("tiny", tokenizer, split.length, None)
            model.build_in_name_scope()
            model.set_weights(weights)
        task.settings = config(grad_cache)
        task.embedder = TextEmbedder(model, "mean")
        variables = model.trainable_variables

        def replica_step(rows):
            context = tf.distribute.get_replica_context()
            here = task.loss_weights(rows)
            share = here / context.all_reduce(tf.distribute.ReduceOp.SUM, here)
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.reshape(task.training_outputs(model, rows, False).loss, [1, -1]) * share)
            gradients = [tf.zeros_like(variable) if gradient is None else tf.convert_to_tensor(gradient)  # the pooler
                         for gradient, variable in zip(tape.gradient(loss, variables), variables)]
            return loss, gradients

        dataset = tf.data.Dataset.from_tensors(batch).unbatch().batch(ROWS)  # the global batch, split by replica
        inputs = next(iter(strategy.experimental_distribute_dataset(dataset)))
        loss, gradients = tf.function(lambda rows: strategy.run(replica_step, args=(rows,)))(inputs)
        loss = strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
        gradients = [strategy.reduce(tf.distribute.ReduceOp.SUM, gradient, axis=None) for gradient in gradients]
        return float(loss), [gradient.numpy() for gradient in gradients]

    one = tf.distribute.get_strategy()
    two = tf.distribute.MirroredStrategy([device.name for device in tf.config.list_logical_devices("CPU")[:2]])
    loss, gradients = loss_and_gradients(one, None)
    found = {}
    for name, strategy, grad_cache in (("grad_cache", one, MINI_BATCH), ("two_replicas", two, None),
                                       ("two_replicas_grad_cache", two, MINI_BATCH)):
        other_loss, other_gradients = loss_and_gradients(strategy, grad_cache)
        found[name] = {"loss": other_loss, "loss_diff": abs(other_loss - loss),
                       "gradient_diff": max(float(np.max(np.abs(a - b))) for a, b in zip(gradients, other_gradients)),
                       "largest_gradient": max(float(np.max(np.abs(a))) for a in gradients)}
    print(json.dumps({"loss": loss, "ways": found}))


if __name__ == "__main__":
    main(*sys.argv[1:])
