"""The randomness of ELECTRA's replacements, drawn in tf.data beside the masks, and the sampling that uses it.

Each batch gets one uniform draw per position (`replacement_draws`) from a stateless generator keyed by the
transform's seed and the batch number, as the masks are: in training that is (seed + virtual input pipeline, step),
so a resumed run, and a run on any number of workers or replicas, replaces with the same draws; validation's are
fixed by its seed. On the device, a masked position's replacement is the token whose interval of the generator's
cumulative softmax holds the draw (inverse transform sampling): one float per position crosses from the host, not
a vocabulary's worth of noise.
"""

from typing import Callable, Dict

import tensorflow as tf

REPLACEMENT_DRAWS = "replacement_draws"  # the batch feature: [batch, length] floats in [0, 1)
# keeps the draws' keys apart from those of the masks ([seed, batch number] folded) and of dropout ([seed, 3])
REPLACEMENT_STREAM = 4

Transform = Callable[[tf.Tensor, Dict[str, tf.Tensor]], Dict[str, tf.Tensor]]


def with_replacement_draws(masking: Transform, seed: int) -> Transform:
    """`masking` (the masked LM's transform of a batch, made with `seed`, maybe a tensor), adding the batch's
    replacement draws."""

    def transform(batch_number: tf.Tensor, batch: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        base = tf.stack([tf.cast(seed, tf.int64), tf.constant(REPLACEMENT_STREAM, tf.int64)])
        key = tf.random.experimental.stateless_fold_in(base, tf.cast(batch_number, tf.int64))
        draws = tf.random.stateless_uniform(tf.shape(batch["input_ids"]), seed=key)
        return {**masking(batch_number, batch), REPLACEMENT_DRAWS: draws}

    return transform


def sample_from_draws(logits: tf.Tensor, draws: tf.Tensor) -> tf.Tensor:
    """[batch, length] int32: at each position the token whose share of the cumulative softmax of `logits`
    ([batch, length, vocabulary]) holds `draws` ([batch, length], uniform in [0, 1))."""
    cumulative = tf.math.cumsum(tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1), axis=-1)
    threshold = tf.cast(draws, tf.float32)[..., None] * cumulative[..., -1:]  # the sum is 1 up to rounding
    below = tf.reduce_sum(tf.cast(cumulative <= threshold, tf.int32), axis=-1)
    return tf.minimum(below, tf.shape(logits)[-1] - 1)
