"""`--task mlm`: a masked LM of any family transformers' TensorFlow classes build (RoBERTa by default, the reference
TPU language-modeling recipe; BERT, XLM-R, DistilBERT, ALBERT, DeBERTa-v2, ...), pretrained from scratch
(--model-config) or continued (--model-name-or-path, continued.py: its validation runs once before the first
step), with 🤗's masking.

The trainer reads packed masked-LM shards; the masker (masking.py) masks each batch in tf.data (--masking token,
whole-word or span); the head runs at the masked positions only (sparse_head.py; --dense-mlm-head, or a family whose
head the sparse head does not know: at every position);
validation reports the masked-LM loss over every masked token, its perplexity, and the share of masked tokens
predicted right, with the dense head on the run's masking (so its figures compare across sparse and dense runs;
`evaluate --masking token` scores runs of any masking alike); the output folder holds the model of the last epoch.
"""

from dataclasses import replace
from typing import Callable, Dict, List, Optional

from mlm_tpu.console import log
from mlm_tpu.errors import UserError
from mlm_tpu.mlm.masking import Masking, MlmMasker
from mlm_tpu.mlm.masking import SPAN
from mlm_tpu.mlm.continued import FLAG, continued_masked_lm
from mlm_tpu.mlm.prediction_slots import CROSSING_WORD_SLOTS, MASKED_POSITIONS
from mlm_tpu.mlm.sparse_head import encoder_and_head, sparse_outputs
from mlm_tpu.model_folder import families
from mlm_tpu.model_folder.card import CardWords
from mlm_tpu.model_folder.configs import read_model_config, with_overrides
from mlm_tpu.mlm.presets import DEFAULT_PRESET, check_masked_lm_type, config_for
from mlm_tpu.mlm.shard_kind import MASKED_LM
from mlm_tpu.shards.format import IGNORE_INDEX
from mlm_tpu.shards.reading import ShardSet
from mlm_tpu.tokenizer.load import load_tokenizer
from mlm_tpu.training.evaluation import TokenValidation
from mlm_tpu.training.flops import ExampleCost, masked_lm_cost
from mlm_tpu.training.task import Task, Validation, check_length, tokenizer_source
from mlm_tpu.training.vocabulary_growth import check_new_embeddings, vocabulary_growth


class MaskedLmTask(Task):
    model_class = families.GENERIC.model_class("masked_lm")  # the generic family's; a folder's own loads its own
    accuracy_name = "masked_accuracy"
    validates_before_training = True
    grows_vocabulary = True  # continued with a --tokenizer that extends the checkpoint's (--new-embeddings)
    default_masking = Masking()  # what a run that gives no masking flags masks (🤗's, 80/10/10)

    def __init__(self, name: str, declared=None):
        super().__init__(name, declared)
        self.masking = self.eval_masking = self.default_masking
        self.word_starts: Optional[List[bool]] = None  # the tokenizer's word marks, for whole-word and span masking
        self.prediction_slots: Optional[int] = None  # per row, for the sparse head; None: the dense head
        self.continued_from: Optional[str] = None  # the checkpoint a continued run started from, for its card
        self.growth: Dict[int, List[int]] = {}  # the ids an extended --tokenizer adds to the checkpoint's: base pieces
        self.packed_documents = None  # (family, separator id): each document of a packed row attends to itself

    def check(self, config) -> None:
        super().check(config)
        if config.model_name_or_path and config.model_config:
            raise UserError(f"--model-config gives the shape of a model trained from scratch; --model-name-or-path "
                            f"{config.model_name_or_path} continues one of its own shape: drop --model-config "
                            "(--config-overrides may still change its dropout and similar settings)")
        check_new_embeddings(config)
        Masking.of(config, self.default_masking)  # a bad --masking or replacement split, refused before anything loads
        if config.dense_mlm_head and config.max_predictions_per_seq:
            raise UserError("--max-predictions-per-seq sets the sparse head's prediction slots; the dense head "
                            "predicts at every position: drop one of --dense-mlm-head and --max-predictions-per-seq")

    def with_defaults(self, config):
        """`config` with the replacement split it masks with (the task's default where not given), so that
        training_args.json and the backup's settings say the split the run used."""
        masking = Masking.of(config, self.default_masking)
        return replace(config, mask_replace_prob=masking.mask_replace_prob,
                       random_replace_prob=masking.random_replace_prob)

    def load_tokenizer(self, config):
        source = tokenizer_source(config)  # with --delta, the base model's own when --tokenizer is not given
        if not source:
            raise UserError("--tokenizer is required: the tokenizer the shards were made with")
        name, flag = source
        tokenizer = load_tokenizer(name, flag)
        _check_mask_token(tokenizer, f"{flag} {name}")
        return tokenizer

    def features(self, max_length: Optional[int], max_target_length: Optional[int]) -> Dict[str, Optional[int]]:
        return MASKED_LM.features(max_length)

    def prepare(self, config, tokenizer, train: ShardSet, evaluation: Optional[ShardSet]) -> None:
        if config.model_name_or_path:  # its positions, before its weights load: past them TensorFlow fails mid-run
            base = with_overrides(read_model_config(config.model_name_or_path, FLAG), config.config_overrides)
            check_length(base, train.length, f"{FLAG} {config.model_name_or_path}",
                         f"--train-dataset holds {train.length}-token examples", "shard with", extensible=True)
            if self.grows_vocabulary:
                self.growth = vocabulary_growth(config.model_name_or_path, tokenizer, config.new_embeddings)
        self._set_masking(config, tokenizer)
        family = families.of_run(config.model_config, config.model_name_or_path)
        self._set_packing(family, tokenizer, train.length)
        validated = (f"; validation at {self.eval_masking.mlm_probability:.0%}"
                     if self.eval_masking.describe() != self.masking.describe() else "")
        log(f"Masking: {self.masking.describe()}{validated}")
        if config.dense_mlm_head:
            log("Masked-LM head: dense, at every position (--dense-mlm-head)")
            return
        given = config.max_predictions_per_seq
        self.prediction_slots = min(given or self.masking.default_slots(train.length), train.length)
        at = f"at --mlm-probability {self.masking.mlm_probability:g}"
        if self.masking.within_row_budget:
            why = f"a full row's masking budget {at}"
            beyond = "no row masks more: a word that does not fit is left unmasked, whole"
        elif self.masking.mode == SPAN:
            why = f"a full row's masking budget {at}, and {CROSSING_WORD_SLOTS} for the word that crosses it"
            beyond = "no row masks more: a word that does not fit is left unmasked, whole"
        else:
            why = f"enough for all but 1e-6 of rows {at}"
            beyond = "a row's masks beyond them are left unmasked"
        log(f"Masked-LM head: sparse, at {self.prediction_slots} of the {train.length} positions of each row "
            f"({'--max-predictions-per-seq' if given else why}); {beyond}")

    def _set_packing(self, family, tokenizer, length: int) -> None:
        """Packed rows keep each document to itself where the family does so (its default for pretraining)."""
        if family.packs_documents and tokenizer.sep_token_id is not None:
            _check_frame(tokenizer, length, family.name)
            self.packed_documents = (family, tokenizer.sep_token_id)
            log(f"Packed rows: each document attends only to itself and its rotary positions restart at its first "
                f"token ({family.name}'s default for pretraining; a document ends at {tokenizer.sep_token})")

    def _set_masking(self, config, tokenizer) -> None:
        self.masking = Masking.of(config, self.default_masking)
        self.eval_masking = self.masking.for_validation(config)  # --eval-mlm-probability's
        self.word_starts = self.masking.word_starts(tokenizer)

    def check_steps(self, config, total_steps: int) -> None:
        self.masking.check_steps(total_steps)

    def prepare_evaluation(self, config, model, tokenizer, shards: ShardSet) -> None:
        self._set_masking(config, tokenizer)
        self._set_packing(families.of_model(model), tokenizer, shards.length)  # scored as its validation scored it
        log(f"Masking: {self.masking.describe()}")
        _check_mask_token(tokenizer, f"--model {config.model}")
        check_length(model.config, shards.length, config.model, f"--eval-dataset holds {shards.length}-token examples",
                     "evaluate on shards made with")

    def prepare_inspection(self, config, tokenizer, shards: ShardSet) -> None:
        self._set_masking(config, tokenizer)
        self.prediction_slots = self.masking.default_slots(shards.length)  # as training makes them
        family = families.of_model_config(config.model_config)
        if config.model_config and family is None:  # transformers' shapes: a name train would refuse is refused
            config_for(config.model_config, tokenizer, shards.length)
        self._set_packing(family or families.GENERIC, tokenizer, shards.length)  # its document ids
        _check_mask_token(tokenizer, f"--tokenizer {config.tokenizer}")

    def build_model(self, config, tokenizer, train: ShardSet):
        self.continued_from = config.model_name_or_path
        if config.model_name_or_path:
            model = continued_masked_lm(config.model_name_or_path, tokenizer, config.config_overrides, self.growth,
                                        config.new_embeddings, config.seed)
        elif families.of_model_config(config.model_config):
            family = families.of_model_config(config.model_config)
            model_config = family.fitted_config(family.read_config(config.model_config, config.config_overrides),
                                                tokenizer, train.length)
            model = family.from_config(model_config, "masked_lm")
        else:
            model_config = config_for(config.model_config or DEFAULT_PRESET, tokenizer, train.length,
                                      config.config_overrides)
            check_masked_lm_type(model_config, f"--model-config {config.model_config or DEFAULT_PRESET}")
            model = families.GENERIC.from_config(model_config, "masked_lm")
        if self.prediction_slots is not None and not families.of_model(model).sparse_outputs \
                and encoder_and_head(model) is None:
            log(f"Masked-LM head: dense, at every position, after all: the sparse head does not know where the head "
                f"of a {families.model_type(model.config)} model is")
            self.prediction_slots = None  # so the masker labels every position and the model runs whole
        return model

    def training_outputs(self, model, batch: Dict, training: bool):
        if MASKED_POSITIONS in batch:
            own = families.of_model(model).sparse_outputs  # a family's own sparse prediction, else sparse_head.py's
            return own(model, batch, training) if own else sparse_outputs(model, batch, training)
        return model(**batch, training=training)

    def make_transform(self, tokenizer) -> Callable[[int], MlmMasker]:
        return self.make_masker(tokenizer, self.prediction_slots)

    def make_masker(self, tokenizer, prediction_slots: Optional[int],
                    validation: bool = False) -> Callable[[int], MlmMasker]:
        """seed -> the masker of the run's masking (--masking, its probabilities; `validation`'s rate, else
        training's), into `prediction_slots` per row (the sparse head's), or (None) with labels at every position,
        as validation masks for either head."""
        masking, word_starts = self.eval_masking if validation else self.masking, self.word_starts
        if self.packed_documents:
            return lambda seed: with_document_ids(masking.masker(tokenizer, seed, prediction_slots, word_starts),
                                                  *self.packed_documents)
        return lambda seed: masking.masker(tokenizer, seed, prediction_slots, word_starts)

    def masks(self, example: Dict[str, list]) -> Dict[int, int]:
        positions = example.get(MASKED_POSITIONS, range(len(example["labels"])))  # the slots', or every one
        return {position: label for position, label in zip(positions, example["labels"]) if label != IGNORE_INDEX}

    def example_cost(self, model, shards: ShardSet) -> ExampleCost:
        return masked_lm_cost(model.config, shards.length, self.prediction_slots or shards.length)

    def describe_left_out(self, count: int) -> str:
        return (f"{count:,} masked positions found no prediction slot in their rows and were left unmasked: this "
                f"epoch trained on that many fewer targets than the dense head would; raise "
                f"--max-predictions-per-seq (now {self.prediction_slots}) to keep them")

    def card_words(self, model, tokenizer) -> CardWords:
        # the tokenizer's own mask token (the 🤗 TPU example's card wrote <mask> for a [MASK] tokenizer)
        made = f"by continued pretraining of {self.continued_from}" if self.continued_from else "pretrained from scratch"
        return CardWords("fill-mask", f"a masked language model {made}",
                         f"Paris is the {tokenizer.mask_token or '[MASK]'} of France.", "python -m mlm_tpu.predict")

    def validation(self, strategy, model, tokenizer, shards: ShardSet, per_replica_batch_size: int, seed: int, *,
                   on_tpu: bool) -> Validation:
        return TokenValidation(strategy, model, shards, per_replica_batch_size,
                               self.make_masker(tokenizer, None, validation=True), seed,
                               accuracy_name=self.accuracy_name, tokens_name="masked_tokens", jit_compile=on_tpu)


def with_document_ids(masker: Callable, family, separator_id: int) -> Callable:
    """The masker, its batches holding `document_ids` too (the family's, from the unmasked rows' separators)."""
    def transform(batch_number, batch):
        return {**masker(batch_number, batch), "document_ids": family.document_ids(batch["input_ids"], separator_id)}

    return transform


def _check_frame(tokenizer, length: int, family_name: str) -> None:
    """Packed rows of `length` tokens must be longer than the longest frame of special tokens the tokenizer puts
    around a document (or a pair, [CLS] A [SEP] B [SEP]): a row no longer than the frame holds no text."""
    single, pair = (tokenizer.num_special_tokens_to_add(pair=pair) for pair in (False, True))
    if length <= max(single, pair):
        raise UserError(f"{family_name} packs documents into rows of {length} tokens, but its tokenizer frames each "
                        f"document with {single} special tokens ({pair} around a pair): a row holds no text; shard "
                        f"again with a --max-length above {max(single, pair)}")


def _check_mask_token(tokenizer, what: str) -> None:
    if tokenizer.mask_token_id is None:
        raise UserError(f"{what} has no mask token, so it cannot train or score a masked LM (is it a T5 tokenizer? "
                        "T5 pretrains with --task span-corruption); make one with `python -m mlm_tpu.tokenizer train`")
