"""Bottleneck adapters (Houlsby et al., 2019; Pfeiffer et al., 2021), saved in AdapterHub's `adapters` format."""
