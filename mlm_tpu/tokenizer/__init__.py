"""The tokenizer stage: the families (families.py: unigram.py, bpe.py, wordpiece.py) and their special tokens and
framing (templates.py), training one (training.py), loading one with clear errors (load.py), how one marks word
starts (word_starts.py), and looking at how one encodes text (encode.py)."""
