"""Delta-tuning: train a small delta on a frozen pretrained model, and save it as the PyTorch ecosystem loads it.

One folder per method, the same files in each (as PEFT's `tuners/`): `__init__.py` (registers the method:
its --delta word, its settings, its model module; registry.py), `config.py` (the method's
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

from mlm_tpu.delta.registry import REGISTERED, method_class  # noqa: F401  (the registry, then its members:)
from mlm_tpu.delta import lora, ia3, prompt, prefix, adapter  # noqa: F401,E402,I001  (each registers; --help order)

METHODS = tuple(REGISTERED)  # the --delta words, in the order of --help
METHOD_SETTINGS = {name: registered.settings for name, registered in REGISTERED.items()}  # method -> settings class
