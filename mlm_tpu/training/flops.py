"""Model FLOPs of one training example, counted as PaLM's appendix B counts them, from a model's shape: what MFU
(throughput.py) divides by the device's peak. Each task feeds it its model's shape (mlm/, electra/, t5/).

PaLM (Chowdhery et al. 2022, appendix B) counts 6N + 12·L·H·Q·T FLOPs per token of a training step: 2 per weight
in the forward pass and 4 in the backward, for the N weights a token's activations are multiplied by, plus the
attention's own matmuls (scores Q·Kᵀ and their weighted sum of V, 2·2·T·H·Q per token and layer forward, three
times that with the backward), L layers of H heads of width Q over T positions. Here:
- N is every parameter a position runs through (weights, biases, layer norms), counted by where it runs: the
  embedding tables are looked up, not multiplied, so they are left out; the output projection onto the vocabulary is
  a matmul, so it is counted (once, even where it is the tied input embedding: that is PaLM's N, which holds its
  shared embedding once);
- a part of the model counts only at the positions that run it: a sparse masked-LM head at its prediction slots
  (padding slots included: they are computed), T5's cross-attention keys and values at the encoder's positions;
- a layer two models share counts in each model that runs it: ELECTRA's embeddings' layer norm, in its generator
  and its discriminator;
- attention counts every pair of positions (a causal decoder's masked half too), as PaLM's formula does.
The result is the work of the model, whatever the device does besides (rematerialisation, padding).
"""

from dataclasses import dataclass
from typing import Optional

from mlm_tpu.model_folder import families

TRAINING_FLOPS_PER_WEIGHT = 6  # 2 forward (multiply, add) + 4 backward (the gradients of activations and weights)
ATTENTION_FLOPS_PER_PAIR = 12  # per query position, key position and unit of H·Q width: 2 matmuls x 2 x 3


@dataclass(frozen=True)
class ExampleCost:
    """One training example: the positions it runs through the model (what tokens/s counts: T5's encoder and decoder
    positions both) and the model FLOPs of its forward and backward pass."""

    tokens: int
    flops: float

    @property
    def flops_per_token(self) -> float:
        return self.flops / self.tokens


def attention_flops(layers: int, width: int, queries: int, keys: int) -> float:
    """PaLM's 12·L·H·Q·T term for `queries` positions attending to `keys` positions, `width` = H·Q."""
    return ATTENTION_FLOPS_PER_PAIR * layers * width * queries * keys


def encoder_layer_parameters(hidden: int, intermediate: int) -> int:
    """One BERT/RoBERTa layer: query, key, value and output projections (weights and biases), the feed-forward's two
    dense layers, and two layer norms (scale and offset)."""
    attention = 4 * (hidden * hidden + hidden)
    feed_forward = hidden * intermediate + intermediate + intermediate * hidden + hidden
    return attention + feed_forward + 2 * 2 * hidden


def masked_lm_head_parameters(hidden: int, vocab_size: int, embedding_size: Optional[int] = None) -> int:
    """RoBERTa's (and BERT's) masked-LM head: a dense layer, a layer norm, the projection onto the vocabulary and
    its bias. ELECTRA's generator (and ALBERT) map the hidden size to the `embedding_size` first, where the
    projection's vocabulary lives."""
    width = embedding_size or hidden
    return hidden * width + width + 2 * width + width * vocab_size + vocab_size


def encoder_parameters(config) -> int:
    """The weights a BERT-style encoder runs at each position: its layers, the embeddings' layer norm and, where
    the embeddings are narrower than the layers (ELECTRA's `embedding_size`), their projection to the hidden size."""
    hidden = config.hidden_size
    embedding = getattr(config, "embedding_size", hidden)
    projection = embedding * hidden + hidden if embedding != hidden else 0
    return (config.num_hidden_layers * encoder_layer_parameters(hidden, feed_forward_size(config)) + 2 * embedding
            + projection)


def feed_forward_size(config) -> int:
    """The width of an encoder layer's feed-forward: its config's intermediate_size (DistilBERT's hidden_dim)."""
    return getattr(config, "intermediate_size", None) or config.hidden_dim


def masked_lm_cost(config, length: int, predicted_positions: int) -> ExampleCost:
    """A BERT-style encoder (RoBERTa's config, or ELECTRA's for its generator) with its masked-LM head at
    `predicted_positions` of each row's `length` (the length: a dense head; the prediction slots: a sparse one); a
    family that counts its own (ModernBERT's local layers, their window) counts it."""
    own = families.of_config(config).training_flops(config, length, "masked_lm", predicted_positions)
    if own is not None:
        return ExampleCost(length, own)
    hidden, layers = config.hidden_size, config.num_hidden_layers
    head = masked_lm_head_parameters(hidden, config.vocab_size, getattr(config, "embedding_size", None))
    flops = (TRAINING_FLOPS_PER_WEIGHT * (length * encoder_parameters(config) + predicted_positions * head)
             + attention_flops(layers, hidden, length, length))
    return ExampleCost(length, float(flops))


def electra_cost(generator, discriminator, length: int, predicted_positions: int) -> ExampleCost:
    """ELECTRA's generator and discriminator (their ElectraConfigs) on one example of `length` tokens: the
    generator a masked LM with its head at `predicted_positions`, the discriminator its encoder and its head (a
    dense layer and a projection to one logit) at every position. Both run the shared embeddings' layer norm; the
    sampling between them is no matmul. Tokens/s counts the example's tokens once."""
    hidden = discriminator.hidden_size
    head = hidden * hidden + hidden + hidden + 1  # ElectraDiscriminatorPredictions: dense, dense_prediction
    flops = (masked_lm_cost(generator, length, predicted_positions).flops
             + TRAINING_FLOPS_PER_WEIGHT * length * (encoder_parameters(discriminator) + head)
             + attention_flops(discriminator.num_hidden_layers, hidden, length, length))
    return ExampleCost(length, float(flops))


def t5_cost(config, input_length: int, target_length: int) -> ExampleCost:
    """A T5 encoder-decoder (T5Config) on inputs of `input_length` and targets of `target_length` tokens: the encoder
    at the inputs' positions, the decoder and the output projection at the targets', cross-attention's keys and
    values at the inputs'."""
    d_model, width, feed_forward = config.d_model, config.num_heads * config.d_kv, config.d_ff
    attention = 4 * d_model * width  # q, k, v, o; T5 has no biases, and layer norms of a scale only
    dense = (3 if config.is_gated_act else 2) * d_model * feed_forward
    encoder_layers, decoder_layers = config.num_layers, config.num_decoder_layers
    encoder = encoder_layers * (attention + dense + 2 * d_model) + d_model  # + the final layer norm
    cross_keys_values = decoder_layers * 2 * d_model * width  # run over the encoder's outputs
    decoder = decoder_layers * (2 * attention + dense + 3 * d_model) + d_model - cross_keys_values
    output = d_model * config.vocab_size
    weights = input_length * (encoder + cross_keys_values) + target_length * (decoder + output)
    flops = (TRAINING_FLOPS_PER_WEIGHT * weights + attention_flops(encoder_layers, width, input_length, input_length)
             + attention_flops(decoder_layers, width, target_length, target_length)
             + attention_flops(decoder_layers, width, target_length, input_length))
    return ExampleCost(input_length + target_length, float(flops))
