"""GradCache (Gao et al. 2021, arXiv 2101.06983; sentence-transformers' CachedMultipleNegativesRankingLoss): the loss
and gradients of a contrastive batch larger than memory, exactly.

The loss couples every text of the global batch, so it cannot be cut into micro-batches whose gradients add up
(gradient accumulation would shrink the negatives to a micro-batch's). GradCache cuts the work instead:
1. embed the replica's texts `mini_batch` at a time without keeping activations;
2. take the loss over the global batch from those embeddings, and its gradient with respect to them (the gathered
   rows' gradients come back to their replica through all_gather's own gradient);
3. run each mini-batch again, this time with a tape, and pull that gradient back into the weights.
The weights' gradients are the sum over mini-batches of d(embeddings)/d(weights) x dLoss/d(embeddings): the one-pass
batch's, up to float rounding. Only one mini-batch's activations are alive at a time.

Both passes must see the same model: they run without dropout (keyed dropout draws its noise for a replica's whole
rows, which a mini-batch is not), so a GradCache run trains as if the model's dropout were 0.
"""

from typing import Callable, List, Optional

import tensorflow as tf

from mlm_tpu.embedding.loss import Embedded, Ranking, ranking_loss

# (input_ids, attention_mask) [rows, length] -> embeddings [rows, width]
Embed = Callable[[tf.Tensor, tf.Tensor], tf.Tensor]


def mini_batches(rows: int, size: int) -> List[slice]:
    """The row ranges of `rows` texts `size` at a time (the last may be shorter)."""
    return [slice(start, min(start + size, rows)) for start in range(0, rows, size)]


def split_texts(embeddings: tf.Tensor, rows: int) -> Embedded:
    """The embeddings of a replica's texts, [queries; positives; negatives], as an Embedded."""
    return Embedded(embeddings[:rows], embeddings[rows:2 * rows], embeddings[2 * rows:])


def added(total: Optional[object], gradient: Optional[object]):
    """Two gradients of one weight summed (an embedding table's rows, IndexedSlices, concatenated, never dense)."""
    if total is None or gradient is None:
        return gradient if total is None else total
    if isinstance(gradient, tf.IndexedSlices):
        return tf.IndexedSlices(tf.concat([total.values, gradient.values], 0),
                                tf.concat([total.indices, gradient.indices], 0), gradient.dense_shape)
    return total + gradient


def cached_ranking(embed: Embed, input_ids: tf.Tensor, attention_mask: tf.Tensor, rows: int, mini_batch: int,
                   scale: float, symmetric: bool) -> Ranking:
    """The ranking loss of a replica's texts (input_ids [queries; positives; negatives], `rows` queries) with
    GradCache's gradient: `embed` runs on `mini_batch` texts at a time, twice (once without a tape)."""
    parts = mini_batches(int(input_ids.shape[0]), mini_batch)

    @tf.custom_gradient
    def loss_and_embeddings(ids, mask):
        embeddings = tf.stop_gradient(tf.concat([embed(ids[part], mask[part]) for part in parts], axis=0))
        loss = ranking_loss(split_texts(embeddings, rows), scale, symmetric).loss

        def gradient(loss_gradient, unused_embeddings_gradient, variables=None):
            with tf.GradientTape() as tape:
                tape.watch(embeddings)
                again = ranking_loss(split_texts(embeddings, rows), scale, symmetric).loss
            cached = tape.gradient(again, embeddings) * loss_gradient
            totals = [None] * len(variables)
            for part in parts:
                with tf.GradientTape() as tape:
                    pass_embeddings = embed(ids[part], mask[part])
                gradients = tape.gradient(pass_embeddings, variables, output_gradients=cached[part])
                totals = [added(total, gradient) for total, gradient in zip(totals, gradients)]
            return (None, None), totals

        return (loss, embeddings), gradient

    loss, embeddings = loss_and_embeddings(input_ids, attention_mask)
    ranking = ranking_loss(split_texts(tf.stop_gradient(embeddings), rows), scale, symmetric)
    return Ranking(loss, ranking.scores, ranking.positives)
