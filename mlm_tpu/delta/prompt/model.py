"""Prompt tuning applied to a T5: its encoder and decoder wrapped (prompt/layer.py); the prompt starts as the
embeddings of randomly drawn vocabulary tokens (Lester et al.'s sampled-vocabulary start); PEFT's key
`prompt_embeddings` [virtual tokens, d_model]."""

from typing import Dict

import numpy as np
import tensorflow as tf

from mlm_tpu.delta.method import DeltaMethod, freeze_base
from mlm_tpu.delta.peft_names import task_type
from mlm_tpu.delta.prompt.config import VirtualTokenSettings, adapter_config
from mlm_tpu.delta.prompt.layer import PromptAwareDecoder, PromptedEncoder

KEY = "prompt_embeddings"


class PromptTuning(DeltaMethod):
    name = "prompt"
    settings_class = VirtualTokenSettings
    supported_model_types = ("t5",)


    def apply(self, model) -> None:
        self.check_model(model)
        count = self.settings.num_virtual_tokens
        vocabulary = model.shared.embeddings
        drawn = tf.random.uniform([count], 0, int(vocabulary.shape[0]), dtype=tf.int32)
        self.encoder = PromptedEncoder(model.encoder, tf.gather(vocabulary, drawn).numpy(), count)
        decoder = PromptAwareDecoder(model.decoder, count)
        model.encoder, model.decoder = self.encoder, decoder
        self.delta_layers = [self.encoder, decoder]
        freeze_base(model, self.delta_layers)

    def state_dict(self, model) -> Dict[str, np.ndarray]:
        return {KEY: self.encoder.prompt_embeddings.numpy()}

    def load_state_dict(self, model, state: Dict[str, np.ndarray]) -> None:
        self.encoder.prompt_embeddings.assign(state[KEY])

    def adapter_config(self, model, base_model: str) -> dict:
        return adapter_config(self.settings, model.config, task_type(model, self.name), base_model)


METHOD = PromptTuning
