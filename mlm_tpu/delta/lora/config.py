"""LoRA's settings, with PEFT's default targets per model type, and the adapter_config.json PEFT reads."""

from dataclasses import dataclass
from typing import Optional, Tuple

# PEFT's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING: the model types LoRA takes here
DEFAULT_TARGETS = {"t5": ("q", "v"), "roberta": ("query", "value"), "bert": ("query", "value"),
                   "electra": ("query", "value")}


@dataclass(frozen=True)
class LoraSettings:
    rank: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    targets: Optional[Tuple[str, ...]] = None  # None: DEFAULT_TARGETS of the model type
    use_rslora: bool = False

    @classmethod
    def of(cls, config) -> "LoraSettings":
        return cls(config.lora_rank, config.lora_alpha, config.lora_dropout, config.lora_targets, config.use_rslora)

    def targets_for(self, model_type: str) -> Tuple[str, ...]:
        return tuple(self.targets or DEFAULT_TARGETS[model_type])

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
