"""A task plug-in with a delta: the product line's task (masked LM, T5 classification or generation, an encoder's
sequence or token classification) runs as it is, on a pretrained model whose weights stay frozen, and what trains
and is saved is the delta alone, with a classifier's new head beside it (PEFT's modules_to_save)."""

import dataclasses
import os
from typing import Optional

from mlm_tpu.console import log
from mlm_tpu.delta import method_class
from mlm_tpu.delta.modules_to_save import HEAD_MODULES, modules_to_save
from mlm_tpu.delta.peft_names import head_task_type
from mlm_tpu.errors import UserError
from mlm_tpu.model_folder.configs import longest_input


class DeltaTask:
    """`task` (any mlm_tpu.training.task.Task) with `--delta`: delegates everything but building and saving."""

    def __init__(self, task, config):
        self.task = task
        self.method = method_class(config.delta).of(config)
        self.base_model = config.model_name_or_path

    def __getattr__(self, name):
        return getattr(self.task, name)

    @property
    def no_weight_decay(self):
        return self.task.no_weight_decay + self.method.no_weight_decay

    def _takes_pretrained_weights(self) -> bool:
        """The masked-LM task trains from scratch only: here it starts from --model-name-or-path."""
        return self.task.takes_pretrained_weights

    def _config_for_task(self, config):
        """The config the task checks: one that trains from scratch does not take --model-name-or-path itself."""
        if self._takes_pretrained_weights():
            return config
        return dataclasses.replace(config, model_name_or_path=None)

    def check(self, config) -> None:
        if not config.model_name_or_path:
            raise UserError(f"--delta {config.delta} trains a small delta on a pretrained model, whose weights stay "
                            "frozen: give it with --model-name-or-path (a folder trained with mlm_tpu, or a Hub name)")
        if config.model_config or config.config_overrides:
            raise UserError(f"--delta {config.delta} keeps --model-name-or-path's shape; drop --model-config and "
                            "--config-overrides")
        if config.pack and self.method.why_not_packed:
            raise UserError(f"--pack cannot run --delta {config.delta}: {self.method.why_not_packed}; drop --pack, or "
                            "choose another --delta")
        if head_task_type(self.task.model_class.__name__) and not self.method.trains_heads:
            raise UserError(f"--task {config.task} delta-tunes an encoder with --delta lora or ia3 (which train its "
                            f"new head too); --delta {config.delta} is for T5 here")
        self.task.check(self._config_for_task(config))

    def check_base(self, base_config, where: str) -> None:
        self.task.check_base(base_config, where)
        self.method.check_model_type(base_config.model_type)

    def build_model(self, config, tokenizer, train):
        if self._takes_pretrained_weights():
            model = self.task.build_model(config, tokenizer, train)
        else:
            from mlm_tpu.model_folder.loading import load_model

            model = load_model(config.model_name_or_path, self.task.model_class, "--model-name-or-path")
        model.build_in_name_scope()
        self.method.check_model(model)
        self._check_length(model, train.length, config)
        self.method.modules_to_save = modules_to_save(model, self.task.new_weights)
        self.method.apply(model)
        trainable = sum(int(v.shape.num_elements()) for v in model.trainable_variables)
        total = trainable + sum(int(v.shape.num_elements()) for v in model.non_trainable_variables)
        whole = [module for module in self.method.modules_to_save if module not in HEAD_MODULES] + ["the head"]
        log(f"Delta-tuning with {self.method.name}: {trainable:,} of {total:,} parameters train "
            f"({trainable / total:.3%}{', ' + ' and '.join(whole) + ' included' if self.method.saved_layers else ''}"
            f"); the {total - trainable:,} of {config.model_name_or_path} stay frozen")
        return model

    def _check_length(self, model, length: int, config) -> None:
        limit = longest_input(model.config)
        if limit and length > limit:
            raise UserError(f"examples of {length} tokens are longer than {config.model_name_or_path} takes ({limit} "
                            "tokens); shard with a smaller --max-length")

    def save_model(self, folder: str, model, tokenizer, facts, records, name: str) -> None:
        from mlm_tpu.delta.folder import save_adapter_folder

        save_adapter_folder(folder, self.method, model, tokenizer, _base_reference(self.base_model), facts, records,
                            name)

    def write_card(self, folder: str, facts, name: str, has_loss_plot: bool) -> None:
        from mlm_tpu.delta.card import write_adapter_card

        write_adapter_card(folder, self.method, facts, _base_reference(self.base_model), name, has_loss_plot)


def _base_reference(name_or_path: str) -> str:
    """The base model as the adapter folder names it: a local folder by its absolute path, else the Hub name."""
    return os.path.abspath(name_or_path) if os.path.isdir(name_or_path) else name_or_path


class SavedAdapterTask:
    """The plug-in of the task an adapter folder was trained for, loading the folder as its base model with the
    delta applied (evaluate, predict, export --merge): `base_model` overrides the base the folder names."""

    def __init__(self, task, folder: str, base_model: Optional[str] = None):
        self.task = task
        self.folder = folder
        self.base_model = base_model

    def __getattr__(self, name):
        return getattr(self.task, name)

    def load_saved_model(self, name_or_path: str, model_class=None, flag: str = "--model"):
        from mlm_tpu.delta.folder import load_adapter
        from mlm_tpu.tokenizer.load import load_tokenizer

        tokenizer = load_tokenizer(name_or_path, flag)
        model, _ = load_adapter(name_or_path, self.base_model, flag)
        return model, tokenizer
