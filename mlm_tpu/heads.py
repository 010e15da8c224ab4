"""What differs between pretraining a masked LM (`--head mlm`) and fine-tuning T5 (`--head t5`).

The trainer (training.py) does everything the two share: strategy, shards, input pipeline,
optimizer, backup, saving, TensorBoard and the Hub. A head says which tokenizer and shards it
needs, builds its model, turns decoded batches into model inputs, and adds its own validation.
"""

import argparse
from typing import Callable, Dict, List, Optional

from transformers import TFAutoModelForMaskedLM

from mlm_tpu.data import ShardSet, masked_lm_features
from mlm_tpu.errors import UserError
from mlm_tpu.masking import MlmMasker
from mlm_tpu.model_config import config_for
from mlm_tpu.tokenizer.load import load_tokenizer

DEFAULT_MLM_PROBABILITY = 0.15


class Head:
    """The interface the trainer drives; see MaskedLmHead and t5.head.T5Head."""

    flags_not_for_this_head: Dict[str, str] = {}  # flag -> argparse dest; refused when given
    accuracy_name: str  # the compiled metric: accuracy over the positions that take a loss

    def check_arguments(self, args: argparse.Namespace) -> None:
        for flag, dest in self.flags_not_for_this_head.items():
            if getattr(args, dest) is not None:
                raise UserError(f"{flag} does not apply to --head {args.head}")

    def load_tokenizer(self, args: argparse.Namespace):
        raise NotImplementedError

    def features(self, args: argparse.Namespace) -> Dict[str, Optional[int]]:
        """The features the shards must hold, and their lengths (None: what the shards hold)."""
        raise NotImplementedError

    def prepare(self, args: argparse.Namespace, tokenizer, train: ShardSet, evaluation: Optional[ShardSet]) -> None:
        """Checks and settings that need the shards, before any model is built."""

    def build_model(self, args: argparse.Namespace, tokenizer, train: ShardSet):
        """The model, not compiled yet; called inside the strategy's scope."""
        raise NotImplementedError

    def make_transform(self, args: argparse.Namespace, tokenizer) -> Callable[[int], Optional[Callable]]:
        """seed -> what turns a decoded batch into model inputs (None: the batch as it is)."""
        return lambda seed: None

    def validation_callbacks(self, args: argparse.Namespace, strategy, model, evaluation: ShardSet) -> List:
        """Keras callbacks that add this head's validation scores to each epoch's logs."""
        return []

    def best_metric(self, args: argparse.Namespace) -> Optional[str]:
        """The epoch log entry whose best value decides which model the output folder keeps (None: the last)."""
        return None


class MaskedLmHead(Head):
    """RoBERTa pretrained from scratch with 🤗's masking: the reference TPU language-modeling recipe."""

    flags_not_for_this_head = {"--task": "task", "--labels": "labels", "--max-target-length": "max_target_length",
                               "--max-new-tokens": "max_new_tokens", "--model-name-or-path": "model_name_or_path",
                               "--metric-for-best-model": "metric_for_best_model"}
    accuracy_name = "masked_accuracy"

    def load_tokenizer(self, args: argparse.Namespace):
        if not args.tokenizer:
            raise UserError("--tokenizer is required: the tokenizer the shards were made with")
        return load_tokenizer(args.tokenizer)

    def features(self, args: argparse.Namespace) -> Dict[str, Optional[int]]:
        return masked_lm_features(args.max_length)

    def build_model(self, args: argparse.Namespace, tokenizer, train: ShardSet):
        return TFAutoModelForMaskedLM.from_config(config_for(args.model_config or "base", tokenizer, train.length))

    def make_transform(self, args: argparse.Namespace, tokenizer) -> Callable[[int], Callable]:
        probability = args.mlm_probability or DEFAULT_MLM_PROBABILITY
        return lambda seed: MlmMasker(tokenizer, probability, seed)

