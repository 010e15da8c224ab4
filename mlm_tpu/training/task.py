"""What a task adds to the trainer: the interface each product line implements (mlm/task.py, electra/task.py,
t5/*_task.py, encoder/task.py).

The trainer (trainer.py, loop.py) does what every task shares: strategy, shards, input pipeline, optimizer,
the training loop, backups, saving, logs and the Hub. A task says which tokenizer and shards it
needs, builds its model, turns decoded batches into model inputs (masking, span corruption or
nothing), scores the model on the validation shards each epoch, and says what its models are on
their card. The stages never import a task: the command (api, cli) looks its plug-in up in
mlm_tpu/tasks.py and hands it to the trainer, evaluation, inspection and export.
"""

import dataclasses
import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, Optional, Tuple

from mlm_tpu.errors import UserError
from mlm_tpu.model_folder import families
from mlm_tpu.model_folder.card import CardFacts, CardWords
from mlm_tpu.model_folder.configs import longest_input
from mlm_tpu.modernbert.config import MODEL_TYPE as MODERNBERT
from mlm_tpu.shards.format import IGNORE_INDEX
from mlm_tpu.training.config import TrunkConfig
from mlm_tpu.training.settings import MaskingSettings
from mlm_tpu.training.flops import ExampleCost

# reading.py loads TensorFlow, which the registry (its heads are Heads) and the commands that read the registry
# without training (the sharder's 15 s start-up under load) do not need
if TYPE_CHECKING:
    from mlm_tpu.shards.reading import ShardSet

Scores = Dict[str, float]
# a feature a task's transform may add, [rows, 1]: targets it left out of the loss (the sparse masked-LM head's masks
# beyond its prediction slots); the trainer adds them up and the epoch's log line says how many (describe_left_out)
TARGETS_LEFT_OUT = "targets_left_out"
# the settings of masked-LM masking (mlm/masking.py), which evaluating or inspecting what is not a masked LM refuses
MASKING_SETTINGS = tuple(field.name for field in dataclasses.fields(MaskingSettings))


@dataclass(frozen=True)
class Head:
    """A task's head, declared once: what its saved models are, which 🤗 pipeline runs them, and PEFT's task type of
    their adapters (which save the new head whole beside the delta)."""

    class_name: str  # transformers' TF class ("TFAutoModelForSequenceClassification"); its name ends the saved one's
    pipeline_tag: Optional[str] = None  # the pipeline, and the `predict` command, that runs its models
    peft_task_type: Optional[str] = None  # PEFT's task_type ("SEQ_CLS")

    @property
    def suffix(self) -> str:
        """How the architecture of a saved model with this head ends (RobertaForSequenceClassification)."""
        return self.class_name.removeprefix("TF").removeprefix("AutoModel")


def refuse_masking(config, what: str) -> None:
    """An evaluation (or inspection) of what is not a masked LM (`what`: "runs/x is a T5 model") refuses the masking
    flags."""
    for name in MASKING_SETTINGS:
        if getattr(config, name, None) is not None:
            raise UserError(f"--{name.replace('_', '-')} is for masked LMs; {what}")


def check_length(model_config, length: int, model: str, what: str, fix: str, extensible: bool = False) -> None:
    """Refuse, in one line, inputs longer than the model reads: past its positions TensorFlow fails deep inside it
    ("indices[0,855] = 857 is not in [0, 512)"). `what` says where the length comes from ("--train-dataset holds
    600-token examples"), `fix` how to ask for fewer ("shard with"); `extensible`: a training run whose model may
    read longer rows by an override, its positions being rotary (no weight holds them: ModernBERT's)."""
    limit = longest_input(model_config)
    if limit and length > limit:
        longer = (f", or read them by --config-overrides max_position_embeddings={length} (rotary positions: no "
                  "weight changes; see --recipe modernbert-context-extension)"
                  if extensible and families.model_type(model_config) == MODERNBERT else "")
        raise UserError(f"{what}, longer than {model} reads ({limit} tokens); {fix} --max-length {limit} or less"
                        f"{longer}")


def tokenizer_source(config: TrunkConfig) -> Optional[Tuple[str, str]]:
    """(name, flag) of a run's tokenizer: --tokenizer, else the own tokenizer of --model-name-or-path (the model a
    fine-tuning or delta-tuning run starts from), named by that flag in messages; None with neither."""
    if config.tokenizer:
        return config.tokenizer, "--tokenizer"
    if config.model_name_or_path:
        return config.model_name_or_path, "--model-name-or-path"
    return None


def check_base_vocabulary(config: TrunkConfig, tokenizer, grows: bool = False) -> None:
    """A run that starts from --model-name-or-path reads its shards with --tokenizer, but the base's embeddings were
    learnt for the pieces of its own tokenizer: --tokenizer must have the same vocabulary (the same pieces at the
    same ids; its files may differ), or, for a task that `grows` the embeddings, extend it (`tokenizer extend`). A
    base without tokenizer files of its own (or a Hub name) is not checked."""
    from mlm_tpu.tokenizer.extension import check_extension
    from mlm_tpu.tokenizer.load import holds_tokenizer, load_tokenizer

    base = config.model_name_or_path
    if not (config.tokenizer and base and holds_tokenizer(base)):
        return
    base_tokenizer = load_tokenizer(base, "--model-name-or-path")
    base_vocabulary, vocabulary = base_tokenizer.get_vocab(), tokenizer.get_vocab()
    if grows and len(vocabulary) > len(base_vocabulary):
        check_extension(base_tokenizer, tokenizer, f"--tokenizer {config.tokenizer}",
                        f"--model-name-or-path {base}'s")
        return
    if vocabulary != base_vocabulary:
        same = len(vocabulary.items() & base_vocabulary.items())
        raise UserError(f"--tokenizer {config.tokenizer} has another vocabulary than the tokenizer of "
                        f"--model-name-or-path {base}, whose embeddings were learnt for its pieces ({len(vocabulary):,} "
                        f"pieces against {len(base_vocabulary):,}, {same:,} of them the same at the same id); shard "
                        f"the data with the base's tokenizer (`mlm-tpu shard --tokenizer {base} ...`) and drop "
                        "--tokenizer")


def check_one_start(config: TrunkConfig, weights: str) -> None:
    """A fine-tuning task starts from `weights` (--model-name-or-path) or from a shape (from scratch), not both."""
    if config.model_name_or_path and (config.model_config or config.config_overrides):
        raise UserError(f"give --model-name-or-path ({weights}) or --model-config/--config-overrides (from scratch), "
                        "not both")


def run_tokenizer(config: TrunkConfig):
    """--tokenizer, else the tokenizer of --model-name-or-path (tasks that fine-tune a pretrained model)."""
    from mlm_tpu.tokenizer.load import load_tokenizer

    source = tokenizer_source(config)
    if not source:
        raise UserError(f"--task {config.task} needs --tokenizer (the one the shards were made with), or "
                        "--model-name-or-path whose tokenizer made them")
    return load_tokenizer(*source)


@dataclass(frozen=True)
class BestMetric:
    """The validation score that decides which epoch's model the output folder keeps: one score, or the mean of
    several named with commas (GLUE's score of MRPC and QQP: "f1,accuracy")."""

    name: str  # a key of the validation scores ("accuracy", "loss", ...), or several joined by commas
    higher_is_better: bool = True

    @property
    def names(self) -> Tuple[str, ...]:
        return tuple(self.name.split(","))

    def value(self, scores: Dict[str, float]) -> float:
        """The epoch's score: its one score, or the mean of several."""
        return statistics.fmean(scores[name] for name in self.names)

    def improves(self, value: float, best: Optional[float]) -> bool:
        """Whether `value` beats `best` (None: no epoch kept yet). NaN (a run that diverged) is the worst score, so
        the next real one replaces it; as a comparison, `value > NaN` would be false for ever."""
        if best is None:
            return True
        if math.isnan(value) or math.isnan(best):
            return not math.isnan(value)
        return value > best if self.higher_is_better else value < best


class Validation:
    """Scores the model on the validation shards; `run()` is called at each epoch's end."""

    def run(self) -> Scores:
        raise NotImplementedError

    def describe(self, scores: Scores) -> str:
        """The scores in words, for the epoch's log line."""
        raise NotImplementedError


class Task:
    """The interface the trainer (and the evaluate command) drives, one instance per run."""

    model_class: type  # the transformers TF class of its models
    accuracy_name: str  # what the training accuracy counts, for the logs ("masked_accuracy", "token_accuracy")
    takes_pretrained_weights = True  # whether it can start from --model-name-or-path (the masked LM: from scratch)
    # a pretraining task: a run that continues --model-name-or-path validates the checkpoint as loaded before its first
    # step (loop.py), so its log, records and card show what continuing bought
    validates_before_training = False
    packs: bool = False  # whether --pack can put several of its examples in one row
    grows_vocabulary: bool = False  # whether a --tokenizer that extends the base's grows its embeddings (the masked LM)
    no_weight_decay: Tuple[str, ...] = ()  # weight names (substrings) AdamW leaves undecayed, as LayerNorm and biases
    # sub-folders of its model folder that hold models of their own (ELECTRA's generator/), exported with it
    companion_folders: Tuple[str, ...] = ()
    inspects_with_a_model: bool = False  # inspection needs a trained model (--model): ELECTRA's generator samples
    token_features: Tuple[str, ...] = ("input_ids", "labels")  # features of token ids, shown as text by inspection
    new_weights: Tuple[str, ...] = ()  # PyTorch names of the built model's weights its pretrained base lacked (a new
    # head): a delta-tuning run trains and saves them beside its delta

    def __init__(self, name: str, declared=None):
        self.name = name
        self.declared = declared  # its declaration in the task registry (mlm_tpu/tasks.py): settings, shards, head

    @property
    def shard_kind(self) -> str:
        """The name of the kind of split it trains on."""
        return self.declared.shard_kind

    @property
    def shard_kinds(self):
        """Every kind of split (mlm_tpu.shards.kinds.ShardKinds, the registry's): what reading a split needs to say
        which kind it is, and what it is when it is not this task's."""
        return self.declared.shard_kinds()

    @property
    def split_kind(self):
        """The kind of split it trains on (a mlm_tpu.shards.kinds.ShardKind): its features and their lengths."""
        return self.shard_kinds.kinds[self.shard_kind]

    @property
    def head_class(self) -> type:
        """transformers' TF class of its declared head (a task whose saved models' head names it)."""
        import transformers

        return getattr(transformers, self.declared.head.class_name)

    def check(self, config: TrunkConfig) -> None:
        """Refuse settings of this task that cannot work (those of other tasks: tasks.check_settings)."""
        if config.task != self.name:
            raise ValueError(f"the plug-in of --task {self.name} was handed a run of --task {config.task}")
        if config.model_name_or_path and not self.takes_pretrained_weights:
            raise UserError(f"--model-name-or-path does not apply to --task {self.name}, which trains from scratch; "
                            "drop it (or add --delta to tune that model)")
        if config.pack and not self.packs:
            raise UserError(f"--pack packs text-to-text examples (--task classification or generation); --task "
                            f"{self.name} trains on rows that are already full: drop --pack")

    def with_defaults(self, config: TrunkConfig) -> TrunkConfig:
        """`config` with the task's defaults filled in where they depend on the task, so that training_args.json and
        the backup's settings record the values the run used (the masked LM's replacement split)."""
        return config

    def check_base(self, base_config, where: str) -> None:
        """Refuse a pretrained model (its config: nothing is loaded yet) this task cannot start from; `where` names
        it ("--model-name-or-path runs/x")."""
        from mlm_tpu.model_folder.checks import check_model_type

        check_model_type(base_config, self.model_class, where, f"--task {self.name}")

    def load_tokenizer(self, config: TrunkConfig):
        raise NotImplementedError

    def features(self, max_length: Optional[int], max_target_length: Optional[int]) -> Dict[str, Optional[int]]:
        """The features the shards must hold, and their lengths (None: what the shards hold)."""
        raise NotImplementedError

    def prepare(self, config: TrunkConfig, tokenizer, train: "ShardSet", evaluation: Optional["ShardSet"]) -> None:
        """Settings and checks that need the shards, before any model is built."""

    def prepare_evaluation(self, config, model, tokenizer, shards: "ShardSet") -> None:
        """The same for `python -m mlm_tpu.evaluate` (an EvaluationConfig), from a saved model."""

    def prepare_inspection(self, config, tokenizer, shards: "ShardSet") -> None:
        """The same for `python -m mlm_tpu.inspect` (an InspectionConfig): what `make_transform` needs, from the
        shards alone."""

    def build_model(self, config: TrunkConfig, tokenizer, train: "ShardSet"):
        """The model (called inside the strategy's scope)."""
        raise NotImplementedError

    def training_outputs(self, model, batch: Dict, training: bool):
        """The model's outputs on a training batch (packed rows too, for tasks that pack; a masked LM's prediction
        slots): `.loss`, the loss's terms, each the mean over the positions `loss_weights` counts for it (a task of one
        term: a scalar, or values whose mean is that term's, as a sequence classifier's per-example losses), and what
        `training_counts` reads (by default `.logits`, lined up with the batch's labels)."""
        return model(**batch, training=training)

    def loss_weights(self, batch: Dict):
        """[terms]: how many positions of this replica's batch each term of the loss is the mean over, so the trainer
        weighs the replicas' means into the global batch's, on any number of replicas (default: one term, the
        positions that take a loss)."""
        import tensorflow as tf

        return tf.reshape(tf.reduce_sum(tf.cast(tf.not_equal(batch["labels"], IGNORE_INDEX), tf.float32)), [1])

    def training_hits(self, logits, labels):
        """Where the model's guess is right (bool, the shape of `labels`), for the training accuracy: the argmax."""
        import tensorflow as tf

        return tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), tf.cast(labels, tf.int32))

    def training_counts(self, outputs, batch: Dict):
        """(hits, scored) of a training batch, whose ratio is the training accuracy the logs show (default: the
        positions that take a loss, and those of them `training_hits` finds right)."""
        import tensorflow as tf

        scored = tf.not_equal(batch["labels"], IGNORE_INDEX)
        right = tf.logical_and(scored, self.training_hits(outputs.logits, batch["labels"]))
        return tf.reduce_sum(tf.cast(right, tf.float32)), tf.reduce_sum(tf.cast(scored, tf.float32))

    def example_cost(self, model, shards: "ShardSet") -> Optional[ExampleCost]:
        """The positions and model FLOPs of one training example of `shards` (training/flops.py), for tokens/s and
        MFU in the logs (None: not counted)."""
        return None

    def describe_left_out(self, count: int) -> str:
        """The epoch's log line on `count` targets its batches left out (their TARGETS_LEFT_OUT)."""
        return f"{count:,} targets were left out of the loss"

    def check_steps(self, config: TrunkConfig, total_steps: int) -> None:
        """Refuse settings that cannot take a run of `total_steps` steps (known once the steps are planned, before
        anything is written)."""

    def make_transform(self, tokenizer) -> Callable[[int], Optional[Callable]]:
        """seed -> what turns a decoded batch into model inputs, given its batch number (None: the batch as is)."""
        return lambda seed: None

    def masks(self, example: Dict[str, list]) -> Optional[Dict[int, int]]:
        """For `inspect`: the masked positions of one transformed example (its features as lists), each with the token
        it hides (None: the task masks nothing)."""
        return None

    def inspected(self, batch: Dict) -> Dict:
        """A transformed batch as the model reads it, for `python -m mlm_tpu.inspect` (default: as it is; ELECTRA adds
        what its generator puts in the discriminator's input)."""
        return batch

    def validation(self, strategy, model, tokenizer, shards: "ShardSet", per_replica_batch_size: int, seed: int, *,
                   on_tpu: bool) -> Validation:
        """What scores the model on `shards` at each epoch's end (and in the evaluate command)."""
        raise NotImplementedError

    def card_words(self, model, tokenizer) -> CardWords:
        """What the model card says of a model of this task (pipeline, summary, widget input, labels)."""
        raise NotImplementedError

    def card_facts(self, model, tokenizer, **run) -> CardFacts:
        """What the card of the model the trainer trained says, with `run`'s facts (ELECTRA's: its discriminator's)."""
        return CardFacts.of_model(self, model, tokenizer, **run)

    def best_metric(self, config: TrunkConfig) -> Optional[BestMetric]:
        """The score whose best epoch the output folder keeps (None: every epoch is saved over the last)."""
        return None

    def load_saved_model(self, name_or_path: str, model_class=None, flag: str = "--model"):
        """(model, tokenizer) of a saved model of this task (an adapter folder's plug-in loads its base with the
        delta applied: mlm_tpu/delta); `model_class` defaults to the task's."""
        from mlm_tpu.model_folder.loading import load_pretrained

        return load_pretrained(name_or_path, model_class or self.model_class, flag)

    def save_model(self, folder: str, model, tokenizer, facts, records: Dict[str, dict], name: str) -> None:
        """Save the trained model into `folder` (a delta-tuning plug-in saves only its delta: mlm_tpu/delta)."""
        from mlm_tpu.model_folder.saving import save_model_folder

        save_model_folder(folder, model, tokenizer, facts, records, name)

    def write_card(self, folder: str, facts, name: str, has_loss_plot: bool) -> None:
        """Write the model card of what `save_model` saved (again, once the loss plot is drawn)."""
        from mlm_tpu.model_folder.card import write_model_card

        write_model_card(folder, facts, name, has_loss_plot=has_loss_plot)
