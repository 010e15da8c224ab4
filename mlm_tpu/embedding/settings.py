"""The settings of `--task sentence-embedding`: how a text becomes one vector, and the in-batch negatives' loss."""

from dataclasses import dataclass
from typing import Optional

from mlm_tpu.configuration import setting
from mlm_tpu.model_folder.pooling import CLASSIFIER_POOLINGS


@dataclass
class SentenceEmbeddingSettings:
    """`--task sentence-embedding`'s."""

    embedding_pooling: Optional[str] = setting(  # mean | cls (None: mean)
        None, group="task", metavar="|".join(CLASSIFIER_POOLINGS),
        help="Sentence embedding: what a text's vector is (the words of --classifier-pooling). mean: the mean of the "
             "last hidden states over the real tokens (default, sentence-transformers' mean_tokens); cls: the first "
             "token's last hidden state (cls_token). Saved in 1_Pooling/config.json.")
    similarity_scale: float = setting(
        20.0, low=0, low_open=True, group="task",
        help="Sentence embedding: the cosine similarities are multiplied by this before the cross-entropy against "
             "the positive (sentence-transformers' MultipleNegativesRankingLoss scale; default: 20).")
    symmetric_loss: bool = setting(
        False, group="task",
        help="Sentence embedding: add the loss the other way, each positive against every query of the global batch, "
             "and take the mean of both (sentence-transformers' MultipleNegativesSymmetricRankingLoss).")
    grad_cache_mini_batch_size: Optional[int] = setting(
        None, low=1, group="task", metavar="N",
        help="Sentence embedding: GradCache (Gao et al. 2021; sentence-transformers' "
             "CachedMultipleNegativesRankingLoss). Each replica embeds its batch's texts N at a time without "
             "gradients, takes the loss over the global batch and its gradient with respect to the embeddings, then "
             "runs each N texts again with that gradient: the loss and gradients of the whole batch, with the "
             "activations of N texts in memory. This, not --gradient-accumulation-steps (which would shrink the "
             "negatives to a micro-batch), is how a batch larger than memory trains. Default: one pass.")
