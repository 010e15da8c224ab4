"""In-batch negatives over the GLOBAL batch (sentence-transformers' MultipleNegativesRankingLoss, as GTR trained on
TPUs): each query is scored against every positive and hard negative of every replica, by cosine similarity times a
scale, and the loss is the cross-entropy against its own positive.

Each replica gathers the documents of all replicas (`ReplicaContext.all_gather`, whose gradient sums the replicas'
gradients of the gathered rows and hands each replica those of its own rows back), so a replica's loss is the mean
over its own queries against the global batch, and the replicas' losses, weighted by their share of the queries,
add up to the loss of one device holding the whole batch.
"""

from typing import NamedTuple, Optional

import tensorflow as tf


class Embedded(NamedTuple):
    """A replica's texts as vectors: queries [b, d], positives [b, d], hard negatives [b x n, d] (n may be 0)."""

    queries: tf.Tensor
    positives: tf.Tensor
    negatives: tf.Tensor


class Ranking(NamedTuple):
    """The loss of a replica's queries (the mean over them) and their scores against the global batch's documents
    [b, documents], with the column of each query's positive."""

    loss: tf.Tensor
    scores: tf.Tensor
    positives: tf.Tensor


def gathered(values: tf.Tensor) -> tf.Tensor:
    """`values` of every replica, in replica order (as they are, outside a strategy or on one replica)."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return values
    return context.all_gather(values, axis=0)


def replica_offset(rows) -> tf.Tensor:
    """Where this replica's rows start in the global batch (every replica holds as many)."""
    context = tf.distribute.get_replica_context()
    replica = 0 if context is None else context.replica_id_in_sync_group
    return tf.cast(replica, tf.int32) * rows


def ranking_loss(embedded: Embedded, scale: float, symmetric: bool = False) -> Ranking:
    """MultipleNegativesRankingLoss of this replica's queries against the global batch's positives, then hard
    negatives; `symmetric`: the mean with the loss of this replica's positives against every query."""
    queries, positives, negatives = (tf.math.l2_normalize(tf.cast(values, tf.float32), axis=-1)
                                     for values in embedded)
    rows = tf.shape(queries)[0]
    labels = replica_offset(rows) + tf.range(rows)
    documents = tf.concat([gathered(positives), gathered(negatives)], axis=0)
    scores = scale * tf.matmul(queries, documents, transpose_b=True)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=scores))
    if symmetric:
        backward = scale * tf.matmul(positives, gathered(queries), transpose_b=True)
        loss = (loss + tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                                     logits=backward))) / 2
    return Ranking(loss, scores, labels)


def in_batch_hits(ranking: Ranking) -> tf.Tensor:
    """[b] bool: whether each query's positive scores highest among the global batch's documents."""
    return tf.equal(tf.argmax(ranking.scores, axis=-1, output_type=tf.int32), ranking.positives)


def pool(hidden: tf.Tensor, attention_mask: tf.Tensor, pooling: Optional[str]) -> tf.Tensor:
    """[rows, width]: a text's vector from the last hidden states: the mean over its real tokens, or the first
    token's (`pooling` "cls"), as sentence-transformers' Pooling does."""
    from mlm_tpu.model_folder.pooling import CLS, masked_mean

    if pooling == CLS:
        return tf.cast(hidden[:, 0], tf.float32)
    return tf.cast(masked_mean(hidden, attention_mask), tf.float32)
