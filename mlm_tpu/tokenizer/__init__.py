"""The tokenizer stage: Unigram recipes (unigram.py), training one (training.py), loading one with clear
errors (load.py), and looking at how one encodes text (encode.py)."""
