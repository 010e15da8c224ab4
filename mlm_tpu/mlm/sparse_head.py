"""Sparse masked-LM prediction (Cramming, academic-budget BERT): the head (dense, layer norm, projection onto the
vocabulary and its bias) runs at each row's prediction slots only (prediction_slots.py), not at every position.

Only the masked positions are scored, so the loss is the dense head's, to float rounding, and so are its
gradients; the head, its weights and the saved folder are the model's own (a TFRobertaForMaskedLM stays one).
What it saves is the head's work at the other positions: the head is 38% of the training FLOPs of RoBERTa `small`
with 8,000 tokens (128-token rows), 71% with 32,000, 31% of `base`'s with 50,265 (training/flops.py); at the
default 41 slots of 128, `small` with 8,000 tokens needs 1.35x fewer (benchmarks/sparse_head.py measures the time).

`predictions_at` is the whole idea, for any encoder output and any head: ELECTRA's generator is
`predictions_at(model.electra(...)[0], positions, lambda h: model.generator_lm_head(model.generator_predictions(h)))`.
"""

from typing import Callable, Dict, Tuple

import tensorflow as tf
from transformers.modeling_tf_outputs import TFMaskedLMOutput

from mlm_tpu.mlm.prediction_slots import MASKED_POSITIONS

HEADS = ("lm_head", "mlm", "predictions")  # the head's attribute: RoBERTa's family, BERT, ALBERT


def predictions_at(sequence_output: tf.Tensor, positions: tf.Tensor, head: Callable[[tf.Tensor], tf.Tensor]):
    """The head's logits at `positions` [batch, slots] of `sequence_output` [batch, length, hidden]:
    [batch, slots, vocabulary], what the head gives at those positions when run on every one."""
    return head(tf.gather(sequence_output, positions, batch_dims=1))


def encoder_and_head(model) -> Tuple[Callable, Callable]:
    """The encoder and the head of a transformers TF masked LM (ValueError for a family whose head is not known)."""
    for name in HEADS:
        if hasattr(model, name):
            return getattr(model, model.base_model_prefix), getattr(model, name)
    raise ValueError(f"the sparse head does not know where the head of a {model.config.model_type} model is")


def sparse_outputs(model, batch: Dict[str, tf.Tensor], training: bool) -> TFMaskedLMOutput:
    """The model's loss and logits on a batch of prediction slots (prediction_slots.into_slots): logits
    [batch, slots, vocabulary], the loss over the slots that hold a label, by the model's own loss function."""
    encoder, head = encoder_and_head(model)
    sequence_output = encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                              training=training)[0]
    logits = predictions_at(sequence_output, batch[MASKED_POSITIONS], head)
    return TFMaskedLMOutput(loss=model.hf_compute_loss(batch["labels"], logits), logits=logits)
