"""ModernBERT's training FLOPs per example, counted as training/flops.py counts every family (PaLM's appendix B:
6 per weight a position runs through, plus 12 per attended (query, key) pair and unit of width), with the
attention's real cost: a global layer attends to every position of the row, a local layer to the keys within its
window (|q - k| <= local_attention // 2, fewer at the row's ends). The token embeddings are looked up, not
multiplied, so they count only as the decoder's projection (once, tied or not); norms and biases count where the
config has them. A head counts at the positions that run it: every position (the dense masked-LM head, token
classification), the prediction slots (the sparse head), one pooled vector (sequence classification).
"""

from typing import Optional

from mlm_tpu.modernbert.config import ModernBertConfig

TRAINING_FLOPS_PER_WEIGHT = 6
ATTENTION_FLOPS_PER_PAIR = 12


def norm_parameters(config: ModernBertConfig) -> int:
    return config.hidden_size * (2 if config.norm_bias else 1)


def linear_parameters(inputs: int, outputs: int, bias: bool) -> int:
    return inputs * outputs + (outputs if bias else 0)


def encoder_parameters(config: ModernBertConfig) -> int:
    """Every weight of the encoder a position runs through: the embeddings' norm, each layer's (layer 0 without
    attn_norm), the final norm."""
    hidden, intermediate = config.hidden_size, config.intermediate_size
    layer = (linear_parameters(hidden, 3 * hidden, config.attention_bias)
             + linear_parameters(hidden, hidden, config.attention_bias)
             + linear_parameters(hidden, 2 * intermediate, config.mlp_bias)
             + linear_parameters(intermediate, hidden, config.mlp_bias) + 2 * norm_parameters(config))
    layer_0_attn_norm, embeddings_and_final_norms = norm_parameters(config), 2 * norm_parameters(config)
    return config.num_hidden_layers * layer - layer_0_attn_norm + embeddings_and_final_norms


def head_parameters(config: ModernBertConfig, head: str) -> int:
    """The prediction head (dense, norm) and what follows it: the decoder or the classifier."""
    hidden = config.hidden_size
    if head == "base":
        return 0
    shared = linear_parameters(hidden, hidden, config.classifier_bias) + norm_parameters(config)
    if head == "masked_lm":
        return shared + linear_parameters(hidden, config.vocab_size, config.decoder_bias)
    return shared + linear_parameters(hidden, config.num_labels, True)


def window_pairs(length: int, half_window: int) -> int:
    """The (query, key) pairs of a row of `length` within |q - k| <= half_window."""
    return sum(min(length - 1, query + half_window) - max(0, query - half_window) + 1 for query in range(length))


def attention_pairs(config: ModernBertConfig, length: int) -> int:
    """The attended pairs of all layers: length² per global layer, the window's per local one."""
    local = window_pairs(length, config.sliding_window)
    return sum(length * length if config.is_global(index) else local for index in range(config.num_hidden_layers))


def training_flops(config: ModernBertConfig, length: int, head: str = "masked_lm",
                   head_positions: Optional[int] = None) -> float:
    """FLOPs of one training example of `length` positions; `head_positions` where the head runs (default: every
    position, or 1 for sequence classification)."""
    if head_positions is None:
        head_positions = 1 if head == "sequence_classification" else length
    weights = encoder_parameters(config) * length + head_parameters(config, head) * head_positions
    return float(TRAINING_FLOPS_PER_WEIGHT * weights
                 + ATTENTION_FLOPS_PER_PAIR * config.hidden_size * attention_pairs(config, length))


def training_flops_per_token(config: ModernBertConfig, length: int, head: str = "masked_lm",
                             head_positions: Optional[int] = None) -> float:
    return training_flops(config, length, head, head_positions) / length
