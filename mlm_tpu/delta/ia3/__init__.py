"""(IA)³ (Liu et al., 2022): learned vectors scaling keys, values and the feed-forward's input, 1 at first."""
