"""ModernBERT (Warner et al. 2024; Ettin, mmBERT) in Keras 2: the function of transformers 5's ModernBert* classes
on the same weights. config.py (ModernBertConfig, either config.json spelling), layers.py and model.py (the modules,
named as transformers 5 names them; `build(config, head)`), masks.py (padding, sliding window, packed documents),
weights.py (the table to and from transformers 5's names; safetensors), presets.py (published shapes), flops.py
(training FLOPs per token, local layers counting their window)."""
