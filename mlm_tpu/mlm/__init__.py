"""The masked-LM line on the trainer's machinery: RoBERTa pretrained from scratch (task.py), its masking
(masking.py), its shapes (presets.py), its kind of split (shard_kind.py), and filling masks with the result
(fill_mask.py)."""
