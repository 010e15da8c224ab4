"""LoRA (Hu et al., 2021): a low-rank update B·A beside chosen Dense layers, B = 0 at first."""
