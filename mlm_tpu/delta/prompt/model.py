"""Prompt tuning applied to a T5: its encoder and decoder wrapped (prompt/layer.py); the prompt starts as the
embeddings of randomly drawn vocabulary tokens (Lester et al.'s sampled-vocabulary start); PEFT's key
`prompt_embeddings` [virtual tokens, d_model]."""

from typing import Dict

import numpy as np
import tensorflow as tf

from mlm_tpu.delta.method import DeltaMethod, freeze_base
from mlm_tpu.delta.peft_names import task_type
from mlm_tpu.delta.prompt.config import adapter_config
from mlm_tpu.delta.prompt.layer import PromptAwareDecoder, PromptedEncoder
from mlm_tpu.model_folder.configs import T5_MODEL_TYPES

KEY = "prompt_embeddings"


class LearnsVirtualTokens(DeltaMethod):
    """Prompt and prefix tuning: the delta is one table of virtual tokens, `prompt_embeddings` on the layer
    `self.table`, saved under PEFT's one key; `make_adapter_config` is the method's config.py function."""

    supported_model_types = T5_MODEL_TYPES
    make_adapter_config = staticmethod(adapter_config)
    no_weight_decay = (KEY,)  # virtual tokens: embeddings, not weights to keep small

    def state_dict(self, model) -> Dict[str, np.ndarray]:
        return {KEY: self.table.prompt_embeddings.numpy()}

    def load_state_dict(self, model, state: Dict[str, np.ndarray]) -> None:
        self.table.prompt_embeddings.assign(state[KEY])

    def adapter_config(self, model, base_model: str) -> dict:
        return self.make_adapter_config(self.settings, model.config, task_type(model, self.name), base_model)


class PromptTuning(LearnsVirtualTokens):
    why_not_packed = ("alone, an example's virtual tokens attend to its tokens (and they to them), so each example of "
                      "a packed row would need its own copy of them")

    def apply(self, model) -> None:
        self.check_model(model)
        count = self.settings.num_virtual_tokens
        vocabulary = model.shared.embeddings
        drawn = tf.random.uniform([count], 0, int(vocabulary.shape[0]), dtype=tf.int32)
        self.table = PromptedEncoder(model.encoder, tf.gather(vocabulary, drawn).numpy(), count)
        decoder = PromptAwareDecoder(model.decoder, count)
        model.encoder, model.decoder = self.table, decoder
        self.delta_layers = [self.table, decoder]
        freeze_base(model, self.delta_layers)


METHOD = PromptTuning
