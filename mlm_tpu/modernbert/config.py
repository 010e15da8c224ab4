"""ModernBERT's configuration, as transformers 5's `ModernBertConfig` holds it, read from a config.json in either
spelling and written back in transformers 5's.

A config.json on the Hub says which layers attend globally and their rotary bases in one of two spellings:
- the old one (transformers 4.48-4.57, every ModernBERT and Ettin checkpoint): `global_attn_every_n_layers` (layer
  i is global when i % n == 0), `global_rope_theta`, `local_rope_theta`;
- transformers 5's: `layer_types` (`full_attention` / `sliding_attention`, one per layer) and `rope_parameters`
  ({`full_attention`: {`rope_theta`: ...}, `sliding_attention`: {...}}).
Both become the same `ModernBertConfig`; `to_dict` writes transformers 5's spelling, which transformers 5 reads
without converting. What the model cannot compute as transformers does (a rotary scaling other than the default, an
unknown activation) is refused in one line, as are shapes no model has (a window that is not positive, a list of
layer types of another length than the layers).
"""

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from mlm_tpu.errors import UserError

MODEL_TYPE = "modernbert"
GLOBAL = "full_attention"
LOCAL = "sliding_attention"
LAYER_TYPES = (GLOBAL, LOCAL)
POOLINGS = ("cls", "mean")
# transformers' ACT2FN names this family's checkpoints use; "gelu" is the exact (erf) GELU
ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "relu", "silu", "swish")
OLD_KEYS = ("global_attn_every_n_layers", "global_rope_theta", "local_rope_theta", "rope_theta")
DEFAULT_THETAS = {GLOBAL: 160_000.0, LOCAL: 10_000.0}  # ModernBertConfig.default_theta
# keys transformers writes that say nothing about the model's function (they are kept, not validated)
IGNORED = ("architectures", "model_type", "transformers_version", "dtype", "torch_dtype", "_name_or_path",
           "sliding_window", "deterministic_flash_attn", "reference_compile", "gradient_checkpointing",
           "position_embedding_type", "layer_norm_eps")


@dataclass
class ModernBertConfig:
    """Every field of transformers 5's ModernBertConfig that the model's function depends on, with its defaults
    (those of answerdotai/ModernBERT-base). `extra` keeps the keys of a config.json this class does not model
    (id2label, problem_type, ...), so a folder read and written again says what it said."""

    vocab_size: int = 50368
    hidden_size: int = 768
    intermediate_size: int = 1152
    num_hidden_layers: int = 22
    num_attention_heads: int = 12
    hidden_activation: str = "gelu"
    max_position_embeddings: int = 8192
    initializer_range: float = 0.02
    initializer_cutoff_factor: float = 2.0
    norm_eps: float = 1e-5
    norm_bias: bool = False
    pad_token_id: Optional[int] = 50283
    eos_token_id: Optional[int] = 50282
    bos_token_id: Optional[int] = 50281
    cls_token_id: Optional[int] = 50281
    sep_token_id: Optional[int] = 50282
    attention_bias: bool = False
    attention_dropout: float = 0.0
    layer_types: Tuple[str, ...] = ()
    global_rope_theta: float = DEFAULT_THETAS[GLOBAL]
    local_rope_theta: float = DEFAULT_THETAS[LOCAL]
    local_attention: int = 128
    embedding_dropout: float = 0.0
    mlp_bias: bool = False
    mlp_dropout: float = 0.0
    decoder_bias: bool = True
    classifier_pooling: str = "cls"
    classifier_dropout: float = 0.0
    classifier_bias: bool = False
    classifier_activation: str = "gelu"
    sparse_prediction: bool = False
    sparse_pred_ignore_index: int = -100
    tie_word_embeddings: bool = True
    extra: Dict[str, Any] = field(default_factory=dict)
    tf_legacy_loss = False  # read by transformers' TF loss mixins (not a field: transformers 5 has no such key)

    def __post_init__(self):
        if not self.layer_types:
            self.layer_types = layer_types_every(3, self.num_hidden_layers)
        self.layer_types = tuple(self.layer_types)
        validate(self)

    def __getattr__(self, name: str):
        """A key of config.json this class does not model (id2label, problem_type, task_specific_params...), read
        as transformers' configs give it (id2label's keys as ints); None where the file has none."""
        if name.startswith("__") or name == "extra":
            raise AttributeError(name)
        value = self.extra.get(name)
        return {int(key): label for key, label in value.items()} if name == "id2label" and value else value

    def __setattr__(self, name: str, value) -> None:
        """Set a field, or a key kept in `extra` (what mlm_tpu records in config.json: task_specific_params)."""
        if name in self.__dataclass_fields__ or name == "extra":
            object.__setattr__(self, name, value)
        else:
            self.extra[name] = value

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def sliding_window(self) -> int:
        """How far a local layer looks on each side: query q sees key k when |q - k| <= local_attention // 2
        (transformers 5's `sliding_window`, its masking_utils rule)."""
        return self.local_attention // 2

    @property
    def num_labels(self) -> int:
        """A classifier's outputs: as many as id2label names, 2 when it names none (transformers' default)."""
        return len(self.extra.get("id2label") or {}) or int(self.extra.get("num_labels", 2))

    def is_global(self, layer: int) -> bool:
        return self.layer_types[layer] == GLOBAL

    def rope_theta(self, layer: int) -> float:
        return self.global_rope_theta if self.is_global(layer) else self.local_rope_theta

    def replace(self, **changes) -> "ModernBertConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> Dict[str, Any]:
        """transformers 5's spelling: `layer_types` and `rope_parameters`, no old keys."""
        values = {item.name: getattr(self, item.name) for item in dataclasses.fields(self) if item.name != "extra"}
        values["layer_types"] = list(self.layer_types)
        values["rope_parameters"] = {GLOBAL: {"rope_theta": values.pop("global_rope_theta"), "rope_type": "default"},
                                     LOCAL: {"rope_theta": values.pop("local_rope_theta"), "rope_type": "default"}}
        return {**self.extra, **values, "model_type": MODEL_TYPE}


def layer_types_every(every: int, layers: int) -> Tuple[str, ...]:
    """The old spelling's pattern: layer i attends globally when i % every == 0."""
    return tuple(GLOBAL if index % every == 0 else LOCAL for index in range(layers))


def from_dict(values: Dict[str, Any], source: str = "the ModernBERT config") -> ModernBertConfig:
    """A config from a config.json's dict in either spelling; `source` names it in the error lines."""
    values = dict(values)
    model_type = values.get("model_type", MODEL_TYPE)
    if model_type != MODEL_TYPE:
        raise UserError(f"{source}: model_type is {model_type!r}, not {MODEL_TYPE!r}")
    layers = positive(values.get("num_hidden_layers", ModernBertConfig.num_hidden_layers), "num_hidden_layers",
                      source)
    every = positive(values.pop("global_attn_every_n_layers", 3), "global_attn_every_n_layers", source)
    layer_types = values.pop("layer_types", None)
    if layer_types is None:
        layer_types = layer_types_every(every, layers)
    elif not isinstance(layer_types, (list, tuple)):
        raise UserError(f"{source}: layer_types must be a list of {' or '.join(LAYER_TYPES)}, one per layer")
    thetas = rope_thetas(values, source)
    if "local_attention" not in values and values.get("sliding_window") is not None:
        values["local_attention"] = 2 * values["sliding_window"]  # transformers 5's setter of sliding_window
    known = {item.name for item in dataclasses.fields(ModernBertConfig)} - {"extra", "layer_types"}
    fields = {name: values.pop(name) for name in list(values) if name in known}
    extra = {name: value for name, value in values.items() if name not in IGNORED + OLD_KEYS}
    try:
        return ModernBertConfig(**fields, layer_types=tuple(layer_types), **thetas, extra=extra)
    except UserError as error:
        raise UserError(f"{source}: {error}") from None
    except (TypeError, ValueError) as error:
        raise UserError(f"{source}: {error}") from None


def overridden(config: ModernBertConfig, changes: Dict[str, Any], source: str) -> ModernBertConfig:
    """`config` with `changes` (--config-overrides' names and values), which win over what the config says in
    either spelling: the rotary bases are given to from_dict as the old keys (global_rope_theta, local_rope_theta),
    which the changes then replace. `rope_theta` and `rope_parameters` name no one base, so they are refused."""
    for name in ("rope_theta", "rope_parameters", "rope_scaling"):
        if name in changes:
            raise UserError(f"{source}: {name} names no one rotary base; override global_rope_theta (global layers) "
                            "or local_rope_theta (local layers)")
    values = config.to_dict()
    values.pop("rope_parameters")
    values.update(global_rope_theta=config.global_rope_theta, local_rope_theta=config.local_rope_theta)
    if "num_hidden_layers" in changes and "layer_types" not in changes:
        values.pop("layer_types")  # the pattern of the new count: global every third layer
    return from_dict({**values, **changes}, source=source)


def rope_thetas(values: Dict[str, Any], source: str) -> Dict[str, float]:
    """The global and local rotary bases from `rope_parameters` (transformers 5), else the old keys, else the
    defaults; a rotary scaling other than the default is refused (the model computes the default alone)."""
    parameters = values.pop("rope_parameters", None) or {}
    scaling = values.pop("rope_scaling", None)
    if scaling:
        raise UserError(f"{source}: rope_scaling {scaling} is not supported (only the default rotary embedding)")
    thetas = {}
    for kind, name in ((GLOBAL, "global_rope_theta"), (LOCAL, "local_rope_theta")):
        given, old = parameters.get(kind) or {}, values.pop(name, DEFAULT_THETAS[kind])
        if given.get("rope_type", "default") != "default":
            raise UserError(f"{source}: rope_parameters.{kind}.rope_type {given['rope_type']!r} is not supported "
                            "(only 'default')")
        theta = given.get("rope_theta", old)
        if not isinstance(theta, (int, float)) or theta <= 0:
            raise UserError(f"{source}: the {kind} rope_theta must be a positive number, not {theta!r}")
        thetas[name] = float(theta)
    return thetas


def positive(value, name: str, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UserError(f"{source}: {name} must be a positive whole number, not {value!r}")
    return value


def validate(config: ModernBertConfig) -> None:
    """The checks of shapes no model has, each one line (the caller names the file)."""
    for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                 "local_attention"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise UserError(f"{name} must be a positive whole number, not {value!r}")
    if config.hidden_size % config.num_attention_heads:
        raise UserError(f"hidden_size {config.hidden_size} is not a multiple of num_attention_heads "
                        f"{config.num_attention_heads}")
    if config.head_dim % 2:
        raise UserError(f"the head width {config.head_dim} (hidden_size / num_attention_heads) must be even for "
                        "rotary embeddings")
    if config.local_attention % 2:
        raise UserError(f"local_attention {config.local_attention} is odd; a local layer sees local_attention / 2 "
                        f"tokens on each side, so give an even window ({config.local_attention + 1}, say)")
    if config.local_attention > config.max_position_embeddings:
        raise UserError(f"local_attention {config.local_attention} is wider than the longest row the model reads "
                        f"(max_position_embeddings {config.max_position_embeddings}), so its local layers would "
                        "attend to the whole row; give a window of at most max_position_embeddings")
    if len(config.layer_types) != config.num_hidden_layers:
        raise UserError(f"layer_types names {len(config.layer_types)} layers, but num_hidden_layers is "
                        f"{config.num_hidden_layers}")
    unknown = sorted(set(config.layer_types) - set(LAYER_TYPES))
    if unknown:
        raise UserError(f"layer_types holds {unknown[0]!r}; each must be {' or '.join(LAYER_TYPES)}")
    if config.classifier_pooling not in POOLINGS:
        raise UserError(f"classifier_pooling is {config.classifier_pooling!r}; ModernBERT's are "
                        f"{' and '.join(POOLINGS)}")
    for name in ("hidden_activation", "classifier_activation"):
        if getattr(config, name) not in ACTIVATIONS:
            raise UserError(f"{name} {getattr(config, name)!r} is not supported (one of {', '.join(ACTIVATIONS)})")


def read_config(path: str) -> ModernBertConfig:
    """A config.json file (either spelling) as a ModernBertConfig; a file that is not JSON is one error line."""
    try:
        with open(path, encoding="utf-8") as file:
            values = json.load(file)
    except (OSError, ValueError) as error:
        raise UserError(f"{path}: cannot read a ModernBERT config ({error})") from None
    if not isinstance(values, dict):
        raise UserError(f"{path}: a config.json holds a JSON object")
    return from_dict(values, source=path)


def write_config(config: ModernBertConfig, path: str, architecture: Optional[str] = None) -> None:
    """config.json as transformers 5 writes it (its spelling, the class that loads it in `architectures`)."""
    from mlm_tpu.output_dir import write_json

    values = config.to_dict()
    if architecture:
        values["architectures"] = [architecture]
    write_json(path, values)
