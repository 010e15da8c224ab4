"""A memory plan before a long run: what one replica holds to train a ModernBERT on rows of a given length, so that
a user about to rent a TPU slice knows whether the row fits before the first step fails.

The estimate counts bytes, per replica:
- weights, their gradients and the optimizer's state (float32 whatever the compute type: mixed precision keeps
  float32 weights; Adam's two moments per weight unless the optimizer's own size is given);
- activations kept for the backward pass, per layer and per row: the tensors of each encoder layer that its
  gradient reads (inputs of each matmul and norm, the GeGLU's halves, the rotary float32 copies of q and k), in the
  compute type; a local layer adds its blocked probabilities (attention.py: heads x length x 3 blocks of
  local_attention / 2, float32 and a compute-type copy); a global layer keeps nothing of length x length (its
  chunks are recomputed), only a transient [heads, chunk, length] float32 block, three of them while the backward
  pass runs;
- the masked-LM head at its positions (every position with the dense head): the vocabulary's logits and their
  gradient in float32.
benchmarks/modernbert_long_rows.py checks the activations' growth against measured peaks at the tiny shape.
"""

from dataclasses import dataclass
from typing import Optional

from mlm_tpu.modernbert import flops
from mlm_tpu.modernbert.attention import QUERY_CHUNK
from mlm_tpu.modernbert.config import ModernBertConfig

FLOAT32 = 4
BFLOAT16 = 2
GB = 1e9


@dataclass
class MemoryPlan:
    """Bytes per replica, by part."""

    weights: int
    gradients: int
    optimizer_state: int
    global_layers: int  # activations of all global layers of the batch
    local_layers: int
    head: int
    transient: int  # the largest block alive at once beyond what is kept (a global chunk in the backward pass)

    @property
    def total(self) -> int:
        return (self.weights + self.gradients + self.optimizer_state + self.global_layers + self.local_layers
                + self.head + self.transient)

    def describe(self, length: int, batch: int, precision: str) -> str:
        parts = (("weights", self.weights), ("gradients", self.gradients), ("optimizer state", self.optimizer_state),
                 ("global layers' activations", self.global_layers),
                 ("local layers' activations", self.local_layers), ("head", self.head),
                 ("a global chunk's transients", self.transient))
        shown = ", ".join(f"{name} {size / GB:.2f}" for name, size in parts)
        return (f"Memory plan per replica ({batch} x {length:,} tokens, {precision}): about {self.total / GB:.2f} GB "
                f"({shown} GB); the libraries' own memory comes on top")


def parameters(config: ModernBertConfig) -> int:
    """Every weight of the masked LM: the encoder's, the token embeddings and the head's (its decoder's weight is
    the embeddings' where tied)."""
    tied = config.vocab_size * config.hidden_size if config.tie_word_embeddings else 0
    return (flops.encoder_parameters(config) + config.vocab_size * config.hidden_size
            + flops.head_parameters(config, "masked_lm") - tied)


def layer_activations(config: ModernBertConfig, length: int, compute: int) -> int:
    """Bytes one encoder layer keeps for its gradient at one row, besides its attention probabilities: the layer's
    input and norm output, q/k/v and their float32 rotary copies, the attention output and Wo's, the MLP norm's
    output, Wi's output (both halves), the activation and the product, Wo's input."""
    hidden, intermediate = config.hidden_size, config.intermediate_size
    kept = (2 + 3 + 1 + 1 + 1) * hidden + (2 + 1 + 1 + 1) * intermediate
    return length * (kept * compute + 2 * 2 * hidden * FLOAT32)


def plan(config: ModernBertConfig, length: int, batch: int, compute: int = FLOAT32,
         optimizer_state: Optional[int] = None, head_positions: Optional[int] = None) -> MemoryPlan:
    """The plan of a training step at `batch` rows of `length` tokens, in `compute`-byte activations; the
    optimizer's state in bytes (default: Adam's two float32 moments per weight); the head at `head_positions` per
    row (default: every position, the dense head)."""
    weights = parameters(config) * FLOAT32
    heads = config.num_attention_heads
    block = max(config.sliding_window, 1)
    blocks = -(-length // block)
    local_probabilities = heads * blocks * block * 3 * block * (FLOAT32 + compute)
    count = sum(1 for index in range(config.num_hidden_layers) if config.is_global(index))
    per_layer = layer_activations(config, length, compute)
    positions = length if head_positions is None else head_positions
    head = positions * (2 * config.hidden_size * compute + 2 * config.vocab_size * FLOAT32)
    chunk = min(QUERY_CHUNK, length)
    return MemoryPlan(weights=weights, gradients=weights,
                      optimizer_state=2 * weights if optimizer_state is None else optimizer_state,
                      global_layers=batch * count * per_layer,
                      local_layers=batch * (config.num_hidden_layers - count) * (per_layer + local_probabilities),
                      head=batch * head, transient=(3 * batch * heads * chunk * length * FLOAT32) if count else 0)
