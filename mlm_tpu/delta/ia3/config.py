"""IA3's settings, PEFT's default targets and feed-forward modules per model type, and its adapter_config.json."""

from dataclasses import dataclass
from typing import Optional, Tuple

from mlm_tpu.configuration import comma_separated, setting
from mlm_tpu.model_folder.configs import T5_MODEL_TYPES

# PEFT's TRANSFORMERS_MODELS_TO_IA3_TARGET_MODULES_MAPPING and ..._FEEDFORWARD_MODULES_MAPPING: the model types IA3
# takes here (PEFT maps no electra: BERT's, whose layers ELECTRA's are named as)
DEFAULT_TARGETS = {**dict.fromkeys(T5_MODEL_TYPES, ("k", "v", "wo")), "roberta": ("key", "value", "output.dense"),
                   "bert": ("key", "value", "output.dense"), "electra": ("key", "value", "output.dense")}
FEEDFORWARD = {**dict.fromkeys(T5_MODEL_TYPES, ("wo",)), "roberta": ("output.dense",), "bert": ("output.dense",),
               "electra": ("output.dense",)}


@dataclass(frozen=True)
class Ia3Settings:
    targets: Optional[Tuple[str, ...]] = setting(  # None: DEFAULT_TARGETS of the model type
        None, flag="--ia3-targets", group="delta-tuning", type=comma_separated, metavar="NAMES",
        help="IA3: comma-separated module names (default as PEFT's: k,v,wo for T5 with wo the feed-forward; "
             "key,value,output.dense for RoBERTa and BERT, and ELECTRA as BERT).")

    def targets_for(self, model_type: str) -> Tuple[str, ...]:
        return tuple(self.targets or DEFAULT_TARGETS[model_type])

    def feedforward_for(self, model_type: str) -> Tuple[str, ...]:
        """PEFT requires the feed-forward modules to be among the targets."""
        return tuple(name for name in FEEDFORWARD[model_type] if name in self.targets_for(model_type))


def adapter_config(settings: Ia3Settings, model_type: str, task_type: str, base_model: str, modules_to_save) -> dict:
    return {"peft_type": "IA3", "task_type": task_type, "base_model_name_or_path": base_model,
            "target_modules": sorted(settings.targets_for(model_type)),
            "feedforward_modules": sorted(settings.feedforward_for(model_type)), "fan_in_fan_out": False,
            "init_ia3_weights": True, "inference_mode": True, "modules_to_save": list(modules_to_save) or None}
