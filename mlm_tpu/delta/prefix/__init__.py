"""Prefix tuning (Li & Liang, 2021): learned keys and values before those of T5's decoder self-attention."""
