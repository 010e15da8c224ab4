"""Which weights weight decay pulls toward 0, one rule for every family and optimizer: every weight of rank 2 or more
(kernels, embedding tables) but those the task names; never a vector or a scalar (biases, the gains and shifts of
norms, whatever a family calls them). ModernBERT's trainer (`param_groups_weight_decay` with `filter_bias_norm_wd`) and
Cramming decide by rank too: names cannot, since ModernBERT's norms are `norm`, `attn_norm`, `mlp_norm`, ...
"""

from typing import Sequence

from transformers import AdamWeightDecay


def decays(variable, no_decay: Sequence[str] = ()) -> bool:
    """Whether weight decay applies to `variable`: rank 2 or more, and no name of `no_decay` (the task's: a delta's
    scales and virtual tokens, whose no-op values are not 0) in its name."""
    return variable.shape.rank >= 2 and not any(name in variable.name for name in no_decay)


class AdamW(AdamWeightDecay):
    """transformers' AdamWeightDecay (decoupled weight decay, as create_optimizer builds it), deciding which weights
    decay by `decays` rather than by name substrings (`exclude_from_weight_decay`: the task's names)."""

    def _decay_weights_op(self, var, learning_rate, apply_state):
        import tensorflow as tf

        if not decays(var, self._exclude_from_weight_decay or ()):
            return tf.no_op()
        return super()._decay_weights_op(var, learning_rate, apply_state)
