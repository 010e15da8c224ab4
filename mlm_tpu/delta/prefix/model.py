"""Prefix tuning applied to a T5: a PrefixTable on the model and each decoder self-attention wrapped; decoder
layer l reads rows 4l mod 2L (keys) and 4l+1 mod 2L (values) of the table viewed as [tokens, 2L, heads, size],
where PEFT's `get_prompt` puts them for an encoder-decoder (its encoder-side rows go unused in T5)."""

from mlm_tpu.delta.method import freeze_base
from mlm_tpu.delta.prefix.config import adapter_config
from mlm_tpu.delta.prefix.layer import PrefixedSelfAttention, PrefixTable
from mlm_tpu.delta.prompt.model import LearnsVirtualTokens


class PrefixTuning(LearnsVirtualTokens):
    make_adapter_config = staticmethod(adapter_config)

    def apply(self, model) -> None:
        self.check_model(model)
        config = model.config
        rows = 2 * config.num_decoder_layers
        self.table = PrefixTable(self.settings.num_virtual_tokens, rows, config.num_heads, config.d_kv)
        model.delta_prefix = self.table  # tracked by the model: backups hold it
        wrapped = []
        for index, block in enumerate(model.decoder.block):
            attention_layer = block.layer[0]
            attention_layer.SelfAttention = PrefixedSelfAttention(attention_layer.SelfAttention, self.table,
                                                                  (4 * index) % rows, (4 * index + 1) % rows)
            wrapped.append(attention_layer.SelfAttention)
        self.delta_layers = [self.table, *wrapped]
        freeze_base(model, self.delta_layers)


METHOD = PrefixTuning
