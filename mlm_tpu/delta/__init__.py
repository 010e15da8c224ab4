"""Delta-tuning: train a small delta on a frozen pretrained model, and save it as the PyTorch ecosystem loads it.

One folder per method, the same files in each (as PEFT's `tuners/`): `config.py` (the method's
settings and the `adapter_config.json` PEFT or AdapterHub reads), `layer.py` (the Keras layer that
wraps a layer of transformers' TF model) and `model.py` (how the method is applied to a model, and
its weights under PEFT's names). `method.py` is the interface they share, `task.py` hands a method
to the trainer as a task plug-in, `folder.py` writes and reads adapter folders.

| `--delta` | what trains                                   | saved as                         |
|-----------|-----------------------------------------------|----------------------------------|
| lora      | B·A beside chosen Dense layers (B = 0 first)  | PEFT LORA                        |
| ia3       | a vector scaling chosen Dense layers (1 first) | PEFT IA3                         |
| prompt    | virtual token embeddings before the input     | PEFT PROMPT_TUNING               |
| prefix    | keys and values before the decoder's own      | PEFT PREFIX_TUNING               |
| adapter   | bottleneck MLPs after feed-forward (attention) | AdapterHub `adapters` seq_bn     |

On an encoder's classifier (sequence or token classification), LoRA and IA3 also train the new head and save it
whole beside the delta, as PEFT's SEQ_CLS and TOKEN_CLS adapters hold it (`modules_to_save.py`).
"""

import importlib

METHODS = {"lora": "mlm_tpu.delta.lora.model", "ia3": "mlm_tpu.delta.ia3.model",
           "prompt": "mlm_tpu.delta.prompt.model", "prefix": "mlm_tpu.delta.prefix.model",
           "adapter": "mlm_tpu.delta.adapter.model"}


def method_class(name: str):
    """The DeltaMethod class of `--delta name` (its module imported only when used)."""
    from mlm_tpu.errors import UserError

    if name not in METHODS:
        raise UserError(f"--delta must be one of {', '.join(METHODS)}, not '{name}'")
    return importlib.import_module(METHODS[name]).METHOD


# The settings of each method (TrainingConfig's fields): another method's, or any without --delta, is refused.
SETTINGS = {"lora": ("lora_rank", "lora_alpha", "lora_dropout", "lora_targets", "use_rslora"),
            "ia3": ("ia3_targets",), "prompt": ("num_virtual_tokens",), "prefix": ("num_virtual_tokens",),
            "adapter": ("adapter_kind", "adapter_reduction")}


def check_delta_settings(config) -> None:
    """Refuse a method's settings given (not at their defaults) without --delta, or with another method."""
    import dataclasses

    from mlm_tpu.errors import UserError

    defaults = {field.name: field.default for field in dataclasses.fields(config)}
    own = SETTINGS.get(config.delta, ())
    for name in dict.fromkeys(name for names in SETTINGS.values() for name in names):
        if name not in own and getattr(config, name) != defaults[name]:
            flag = "--" + name.replace("_", "-")
            users = [method for method, names in SETTINGS.items() if name in names]
            now = f"--delta {config.delta}" if config.delta else "a run without --delta (every weight trains)"
            raise UserError(f"{flag} is a setting of {' and '.join(f'--delta {user}' for user in users)}, not of "
                            f"{now}; drop {flag}" + ("" if config.delta else f", or add --delta {users[0]}"))
