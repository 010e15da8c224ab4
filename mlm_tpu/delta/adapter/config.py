"""The adapters' settings and AdapterHub's adapter_config.json: Pfeiffer is its `seq_bn` (after the feed-forward,
ReLU), Houlsby its `double_seq_bn` (after self-attention too, SiLU), each with every field `save_adapter` writes."""

from dataclasses import dataclass

from mlm_tpu.configuration import setting

ADAPTER_NAME = "mlm_tpu"  # the name in AdapterHub's keys (`...adapters.mlm_tpu.adapter_up.weight`)
KINDS = {  # --adapter-kind -> AdapterHub's config name and the fields where the two differ
    "pfeiffer": ("seq_bn", {"mh_adapter": False, "non_linearity": "relu", "original_ln_before": True}),
    "houlsby": ("double_seq_bn", {"mh_adapter": True, "non_linearity": "swish", "original_ln_before": False}),
}
COMMON = {"adapter_residual_before_ln": False, "cross_adapter": False, "dropout": 0.0, "factorized_phm_W": True,
          "factorized_phm_rule": False, "hypercomplex_nonlinearity": "glorot-uniform", "init_weights": "mam_adapter",
          "init_weights_seed": None, "inv_adapter": None, "inv_adapter_reduction_factor": None, "is_parallel": False,
          "learn_phm": True, "leave_out": [], "ln_after": False, "ln_before": False, "original_ln_after": True,
          "output_adapter": True, "phm_bias": True, "phm_c_init": "normal", "phm_dim": 4, "phm_init_range": 0.0001,
          "phm_layer": False, "phm_rank": 1, "residual_before_ln": True, "scaling": 1.0, "shared_W_phm": False,
          "shared_phm_rule": True, "stochastic_depth": 0.0, "use_gating": False}


@dataclass(frozen=True)
class AdapterSettings:
    kind: str = setting(  # pfeiffer (after the feed-forward) | houlsby (also attention)
        "pfeiffer", flag="--adapter-kind", group="delta-tuning", choices=tuple(KINDS),
        help="Bottleneck adapters: pfeiffer (after each feed-forward) or houlsby (after attention too) (default: "
             "pfeiffer).")
    reduction: int = setting(16, low=1, flag="--adapter-reduction", group="delta-tuning",  # hidden / bottleneck size
                             help="Bottleneck adapters: hidden size / bottleneck size (default: 16).")

    def __post_init__(self):
        from mlm_tpu.errors import UserError

        if self.kind not in KINDS:
            raise UserError(f"--adapter-kind must be one of {', '.join(KINDS)}, not '{self.kind}'")


def adapter_config(settings: AdapterSettings, model, base_model: str) -> dict:
    """What AdapterHub's `save_adapter` writes (`init_weights: mam_adapter`, as Bottleneck starts: the
    down-projection as PyTorch's Linear, the up-projection at zero)."""
    _, fields = KINDS[settings.kind]
    return {"config": {**COMMON, **fields, "reduction_factor": settings.reduction},
            "hidden_size": model.config.d_model, "model_class": type(model).__name__.removeprefix("TF"),
            "model_name": base_model, "model_type": model.config.model_type, "name": ADAPTER_NAME,
            "version": "adapters.1.3.0"}
