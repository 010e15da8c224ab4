"""Prompt tuning (Lester et al., 2021): virtual token embeddings before every input, learned; the model frozen."""
