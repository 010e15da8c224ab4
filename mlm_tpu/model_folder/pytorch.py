"""A TensorFlow model's weights in the PyTorch layout of transformers' own classes, as `model.safetensors`.

Transformers 5, the Hub's widgets, pipelines, sentence-transformers and PEFT all load PyTorch
checkpoints; a folder holding only `tf_model.h5` is stranded in TensorFlow. Each TF variable is
named and laid out as transformers' PyTorch class expects by transformers' own mapping
(`modeling_tf_pytorch_utils.convert_tf_weight_name_to_pt_weight_name`: PyTorch names, kernels
transposed); tied weights are written once, as PyTorch's `save_pretrained` writes them (the
decoder of RoBERTa's LM head and T5's shared embeddings are the input embeddings). Written with
numpy and safetensors (metadata {"format": "pt"}): no PyTorch is needed, and transformers 4's
TensorFlow classes read the file back through their PyTorch-checkpoint path. Above
`max_shard_size` the file is split with an index, as transformers does.
"""

import os
from typing import Dict, List

import numpy as np

# transformers' TensorFlow classes of these model types number positions from a padding index hard-coded to 1,
# their PyTorch classes from config.pad_token_id. With any other pad id (the tokenizers of mlm_tpu 0.2 pad with 3,
# as the 🤗 TPU example's do; today's pad with 1), the two compute different position ids from the same input, and
# a model trained in one gives other logits in the other; a config saying 1 makes both compute what the TensorFlow
# model was trained with.
TF_POSITION_PADDING_IDX = {"roberta": 1, "xlm-roberta": 1, "camembert": 1, "longformer": 1, "mpnet": 1,
                           "roberta-prelayernorm": 1}
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
MAX_SHARD_SIZE = "5GB"  # transformers 4's default for PyTorch checkpoints


def align_positions_with_pytorch(config) -> bool:
    """Set the config's pad_token_id to the padding index TensorFlow's class numbers positions from, if it has
    one; return whether it changed (the tokenizer still pads with its own pad token)."""
    padding_idx = TF_POSITION_PADDING_IDX.get(config.model_type)
    if padding_idx is None or config.pad_token_id == padding_idx:
        return False
    config.pad_token_id = padding_idx
    return True


def pytorch_name_and_transpose(variable) -> tuple:
    """(PyTorch parameter name, whether the array is transposed) of one TF variable of `model`."""
    from transformers.modeling_tf_pytorch_utils import TransposeType, convert_tf_weight_name_to_pt_weight_name

    name, transpose = convert_tf_weight_name_to_pt_weight_name(variable.name, tf_weight_shape=variable.shape)
    if transpose not in (TransposeType.NO, TransposeType.SIMPLE):
        raise ValueError(f"{variable.name}: convolution kernels are not exported")  # none in RoBERTa or T5
    return name, transpose is TransposeType.SIMPLE


def pytorch_state_dict(model) -> Dict[str, np.ndarray]:
    """Every weight of a built TF model, under its PyTorch name and in PyTorch's layout."""
    state = {}
    for variable in model.trainable_weights + model.non_trainable_weights:
        name, transpose = pytorch_name_and_transpose(variable)
        array = variable.numpy()
        state[name] = np.ascontiguousarray(array.T if transpose else array)
    for name in list(state):  # ALBERT's TF head adds its decoder's bias, which PyTorch ties to the head's
        head, _, leaf = name.rpartition(".decoder.")
        if leaf == "bias" and f"{head}.bias" in state:
            state[f"{head}.bias"] = state[name]
    return state


def save_pytorch_weights(model, folder: str, max_shard_size: str = MAX_SHARD_SIZE) -> List[str]:
    """Write `model.safetensors` (or its shards and their index) into `folder`; returns the files written."""
    from huggingface_hub import split_state_dict_into_shards_factory
    from safetensors.numpy import save_file

    from mlm_tpu.output_dir import write_json

    state = pytorch_state_dict(model)
    split = split_state_dict_into_shards_factory(state, get_storage_size=lambda array: array.nbytes,
                                                 filename_pattern="model{suffix}.safetensors",
                                                 max_shard_size=max_shard_size)
    for filename, names in split.filename_to_tensors.items():
        save_file({name: state[name] for name in names}, os.path.join(folder, filename), metadata={"format": "pt"})
    if split.is_sharded:
        write_json(os.path.join(folder, WEIGHTS_INDEX_NAME), {"metadata": split.metadata,
                                                              "weight_map": split.tensor_to_filename})
        return [*split.filename_to_tensors, WEIGHTS_INDEX_NAME]
    return list(split.filename_to_tensors)
