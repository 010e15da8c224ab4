"""Sparse masked-LM prediction (Cramming, academic-budget BERT): the head (dense, layer norm, projection onto the
vocabulary and its bias) runs at each row's prediction slots only (prediction_slots.py), not at every position.

Only the masked positions are scored, so the loss is the dense head's, to float rounding, and so are its
gradients; the head, its weights and the saved folder are the model's own (a TFRobertaForMaskedLM stays one).
What it saves is the head's work at the other positions: the head is 38% of the training FLOPs of RoBERTa `small`
with 8,000 tokens (128-token rows), 71% with 32,000, 31% of `base`'s with 50,265 (training/flops.py); at the
default 41 slots of 128, `small` with 8,000 tokens needs 1.35x fewer (benchmarks/sparse_head.py measures the time).

`predictions_at` is the whole idea, for any encoder output and any head; `logits_at` finds a masked LM's encoder and
head, for every family of transformers' TF masked LMs but XLM's and FlauBERT's (ELECTRA's generator:
`generator_predictions` then `generator_lm_head`, which electra/model.py runs so; DistilBERT's four layers).

The encoder is called with input_ids and attention_mask alone, as the dense head's model is (masked-LM shards hold
nothing else): a family with token types (BERT, ALBERT, ELECTRA) then takes them all 0, one segment, which is what
its tokenizer gives a single text and what BERT's own pretraining gives a segment A.
"""

from typing import Callable, Dict, Optional, Tuple

import tensorflow as tf
from transformers.modeling_tf_outputs import TFMaskedLMOutput

from mlm_tpu.mlm.prediction_slots import MASKED_POSITIONS

HEADS = ("lm_head", "mlm", "predictions")  # the head's attribute: RoBERTa's family, BERT's and DeBERTa's, ALBERT


def predictions_at(sequence_output: tf.Tensor, positions: tf.Tensor, head: Callable[[tf.Tensor], tf.Tensor]):
    """The head's logits at `positions` [batch, slots] of `sequence_output` [batch, length, hidden]:
    [batch, slots, vocabulary], what the head gives at those positions when run on every one."""
    return head(tf.gather(sequence_output, positions, batch_dims=1))


def head_of(model) -> Optional[Callable[[tf.Tensor], tf.Tensor]]:
    """A transformers TF masked LM's head, as its `call` runs it on the encoder's output (None where unknown)."""
    if hasattr(model, "generator_lm_head"):  # ELECTRA's and ConvBERT's generators: two layers
        return lambda hidden: model.generator_lm_head(model.generator_predictions(hidden))
    if hasattr(model, "vocab_projector"):  # DistilBERT: four
        return lambda hidden: model.vocab_projector(model.vocab_layer_norm(model.act(model.vocab_transform(hidden))))
    return next((getattr(model, name) for name in HEADS if hasattr(model, name)), None)


def encoder_and_head(model) -> Optional[Tuple[Callable, Callable]]:
    """The encoder and the head of a transformers TF masked LM; None for a family whose head is not known here (the
    dense head trains it)."""
    head = head_of(model)
    return None if head is None else (getattr(model, model.base_model_prefix), head)


def logits_at(model, input_ids: tf.Tensor, attention_mask: tf.Tensor, positions: tf.Tensor, training: bool):
    """A masked LM's logits at `positions` [batch, slots] of its input: [batch, slots, vocabulary]."""
    encoder, head = encoder_and_head(model)
    sequence_output = encoder(input_ids=input_ids, attention_mask=attention_mask, training=training)[0]
    return predictions_at(sequence_output, positions, head)


def sparse_outputs(model, batch: Dict[str, tf.Tensor], training: bool) -> TFMaskedLMOutput:
    """The model's loss and logits on a batch of prediction slots (prediction_slots.into_slots): logits
    [batch, slots, vocabulary], the loss over the slots that hold a label, by the model's own loss function."""
    logits = logits_at(model, batch["input_ids"], batch["attention_mask"], batch[MASKED_POSITIONS], training)
    return TFMaskedLMOutput(loss=model.hf_compute_loss(batch["labels"], logits), logits=logits)
