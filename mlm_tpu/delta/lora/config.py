"""LoRA's settings, with PEFT's default targets per model type, and the adapter_config.json PEFT reads."""

from dataclasses import dataclass
from typing import Optional, Tuple

from mlm_tpu.configuration import comma_separated, setting
from mlm_tpu.model_folder import families
from mlm_tpu.model_folder.configs import T5_MODEL_TYPES

# PEFT's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING: the model types of transformers' classes LoRA takes here
DEFAULT_TARGETS = {**dict.fromkeys(T5_MODEL_TYPES, ("q", "v")), "roberta": ("query", "value"),
                   "bert": ("query", "value"), "electra": ("query", "value")}


def family_targets(model_type: str) -> Tuple[str, ...]:
    """A hand-written family's attention and feed-forward modules (PEFT's table has none of them); () for others."""
    return families.of_values({"model_type": model_type}).projection_modules


def supported_types() -> Tuple[str, ...]:
    """PEFT's model types, then each hand-written family whose projections LoRA wraps."""
    return (*DEFAULT_TARGETS, *(family.name for family in families.HAND_WRITTEN if family.projection_modules))


@dataclass(frozen=True)
class LoraSettings:
    rank: int = setting(8, low=1, flag="--lora-rank", group="delta-tuning",  # the rank r of B·A
                        help="LoRA: rank r of the update (default: 8).")
    alpha: float = setting(16.0, low=0, low_open=True, flag="--lora-alpha", group="delta-tuning",  # scale: alpha / r
                           help="LoRA: the update is scaled by alpha / r (default: 16).")
    dropout: float = setting(0.0, low=0, high=1, high_open=True, flag="--lora-dropout", group="delta-tuning",
                             help="LoRA: dropout on the update's input (default: 0).")
    targets: Optional[Tuple[str, ...]] = setting(  # None: DEFAULT_TARGETS of the model type
        None, flag="--lora-targets", group="delta-tuning", type=comma_separated, metavar="NAMES",
        help="LoRA: comma-separated module names, matched as PEFT matches target_modules (default as PEFT's: q,v for "
             "T5, query,value for RoBERTa, BERT and ELECTRA; for ModernBERT, which PEFT has no default for, its "
             "attention's and feed-forward's Wqkv,Wo,Wi).")
    use_rslora: bool = setting(False, group="delta-tuning",  # scale by alpha / sqrt(r) (rank-stabilized LoRA)
                               help="LoRA: scale by alpha / sqrt(r) (rank-stabilized).")

    def targets_for(self, model_type: str) -> Tuple[str, ...]:
        return tuple(self.targets or DEFAULT_TARGETS.get(model_type) or family_targets(model_type))

    @property
    def scaling(self) -> float:
        return self.alpha / (self.rank ** 0.5 if self.use_rslora else self.rank)


def adapter_config(settings: LoraSettings, targets, task_type: str, base_model: str, modules_to_save) -> dict:
    """PEFT's LoraConfig as `save_pretrained` writes it (the fields that decide the model)."""
    return {"peft_type": "LORA", "task_type": task_type, "base_model_name_or_path": base_model,
            "r": settings.rank, "lora_alpha": settings.alpha, "lora_dropout": settings.dropout,
            "target_modules": sorted(targets), "use_rslora": settings.use_rslora, "bias": "none",
            "fan_in_fan_out": False, "init_lora_weights": True, "inference_mode": True,
            "modules_to_save": list(modules_to_save) or None}
