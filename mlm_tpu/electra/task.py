"""`--task electra`: ELECTRA pretrained from scratch by replaced-token detection, on the masked-LM shards as they are;
or continued from a discriminator and its generator (--model-name-or-path, --generator-name-or-path: continued.py).

Each batch is masked by the masked LM's masker (through MaskedLmTask.make_transform: --masking token, whole-word or
span, into the sparse head's prediction slots unless --dense-mlm-head), by default as ELECTRA masks (masking.py's
ELECTRA_MASKING: with token masking, exactly round(--mlm-probability x the row's tokens) per row; 85% of them the
mask token, 15% kept, none random; --mask-replace-prob and --random-replace-prob still say otherwise), and gets its
replacement draws (replacements.py: one per position, which serves masked tokens, words and spans alike); the
generator fills the masked positions and the discriminator tells every token apart (model.py). The loss is the
generator's masked-LM loss plus λ (--discriminator-weight, 50) times the discriminator's binary cross-entropy over
every real token; the training accuracy logged is the discriminator's. Validation reports both models' losses and
accuracies and the replaced class's precision and recall (validation.py, on masks made without slots, as the masked
LM validates); the output folder holds the discriminator of the last epoch, its generator in generator/ (folders.py).
"""

from typing import Optional

import tensorflow as tf

from mlm_tpu.console import log
from mlm_tpu.electra.continued import GENERATOR_FLAG, check_discriminator, continued_pretrainer
from mlm_tpu.electra.deberta_continued import continued_deberta_pretrainer
from mlm_tpu.electra.folders import GENERATOR_FOLDER, load_electra_folders, save_electra_folders
from mlm_tpu.electra.model import DEFAULT_DISCRIMINATOR_WEIGHT, ElectraPretrainer
from mlm_tpu.electra.pairs import DEBERTA, check_sharing, family_of_model_config, new_models, sharing_of
from mlm_tpu.electra.presets import DEFAULT_PRESET
from mlm_tpu.electra.sharing import SHARING_WORDS
from mlm_tpu.electra.replacements import REPLACEMENT_DRAWS, with_replacement_draws
from mlm_tpu.electra.validation import SCORE_NAMES, ReplacedTokenValidation
from mlm_tpu.errors import UserError
from mlm_tpu.mlm.masking import ELECTRA_MASKING
from mlm_tpu.mlm.task import MaskedLmTask
from mlm_tpu.model_folder.card import CardFacts, CardWords
from mlm_tpu.model_folder.configs import read_model_config
from mlm_tpu.shards.format import IGNORE_INDEX
from mlm_tpu.shards.reading import ShardSet
from mlm_tpu.training.flops import ExampleCost, electra_cost
from mlm_tpu.training.task import Task, Validation


class ElectraTask(MaskedLmTask):
    model_class = Task.head_class  # TFElectraForPreTraining, as mlm_tpu/tasks.py declares it
    accuracy_name = "discriminator_accuracy"
    companion_folders = (GENERATOR_FOLDER,)
    inspects_with_a_model = True
    token_features = ("input_ids", "labels", "discriminator_input_ids", "replaced")  # what `inspected` shows
    default_masking = ELECTRA_MASKING

    def __init__(self, name: str, declared=None):
        super().__init__(name, declared)
        self.discriminator_weight = DEFAULT_DISCRIMINATOR_WEIGHT
        self.inspected_model: Optional[ElectraPretrainer] = None
        self.continued_from: Optional[str] = None  # --model-name-or-path, which the cards name
        self.sharing_given: Optional[str] = None  # --embedding-sharing (None: the family's)

    def check(self, config) -> None:
        self.sharing_given = config.embedding_sharing
        if config.delta:
            raise UserError(f"--delta {config.delta} tunes a pretrained model; --task electra pretrains (or continues) "
                            "both of its models whole: drop --delta (the discriminator it saves can be tuned "
                            "afterwards)")
        if config.generator_name_or_path and not config.model_name_or_path:
            raise UserError(f"{GENERATOR_FLAG} continues a generator beside the discriminator of "
                            "--model-name-or-path; give that discriminator, or drop it to pretrain both from scratch")
        if config.model_name_or_path and config.generator_size_ratio:
            raise UserError(f"--generator-size-ratio shapes a generator trained from scratch; --model-name-or-path "
                            f"{config.model_name_or_path} continues one of its own width: drop --generator-size-ratio")
        if not config.model_name_or_path:
            family = family_of_model_config(config.model_config or DEFAULT_PRESET)
            check_sharing(family, config.embedding_sharing)
            if family == DEBERTA and config.generator_size_ratio:
                raise UserError("--generator-size-ratio shapes ELECTRA's narrower generator; DeBERTa-v3's is the "
                                "discriminator's width and half its depth (rtd_*.json): drop --generator-size-ratio")
        super().check(config)

    def check_base(self, base_config, where: str) -> None:
        check_discriminator(base_config, where)
        check_sharing(base_config.model_type, self.sharing_given)

    def prepare(self, config, tokenizer, train: ShardSet, evaluation: Optional[ShardSet]) -> None:
        super().prepare(config, tokenizer, train, evaluation)
        self.discriminator_weight = config.discriminator_weight or DEFAULT_DISCRIMINATOR_WEIGHT

    def prepare_inspection(self, config, tokenizer, shards: ShardSet) -> None:
        super().prepare_inspection(config, tokenizer, shards)
        self.inspected_model, _ = load_electra_folders(config.model)

    def build_model(self, config, tokenizer, train: ShardSet):
        self.continued_from = config.model_name_or_path
        if config.model_name_or_path:
            family = read_model_config(config.model_name_or_path, "--model-name-or-path").model_type
            sharing = sharing_of(family, config.embedding_sharing)
            if family != DEBERTA:
                return continued_pretrainer(config, tokenizer, self.discriminator_weight, self.growth, sharing)
            if self.growth:
                raise UserError("--task electra grows ELECTRA's embeddings to an extended tokenizer, not yet "
                                "DeBERTa-v3's: continue it with the tokenizer of its checkpoint")
            return continued_deberta_pretrainer(config, tokenizer, self.discriminator_weight, sharing)
        name = config.model_config or DEFAULT_PRESET
        generator, discriminator, shapes = new_models(name, tokenizer, train.length, config.config_overrides,
                                                      config.generator_size_ratio)
        sharing = sharing_of(family_of_model_config(name), config.embedding_sharing)
        log(f"{shapes}; embeddings {SHARING_WORDS[sharing]}; loss = generator loss + {self.discriminator_weight:g} x "
            "discriminator loss")
        return ElectraPretrainer.from_models(generator, discriminator, self.discriminator_weight, sharing)

    def make_transform(self, tokenizer):
        return self.with_draws(super().make_transform(tokenizer))

    @staticmethod
    def with_draws(masking):
        """seed -> the masked LM's transform (`masking(seed)`) with the replacement draws added."""
        return lambda seed: with_replacement_draws(masking(seed), seed)

    def training_outputs(self, model, batch, training: bool):
        return model.on_batch(batch, training)

    def example_cost(self, model, shards: ShardSet) -> ExampleCost:
        return electra_cost(model.generator.config, model.discriminator.config, shards.length,
                            self.prediction_slots or shards.length)

    def loss_weights(self, batch):
        masked = tf.reduce_sum(tf.cast(tf.not_equal(batch["labels"], IGNORE_INDEX), tf.float32))
        return tf.stack([masked, tf.reduce_sum(tf.cast(batch["attention_mask"], tf.float32))])

    def training_counts(self, outputs, batch):
        real = tf.cast(batch["attention_mask"], tf.float32)
        right = tf.cast(tf.equal(outputs.logits > 0, outputs.replaced), tf.float32) * real
        return tf.reduce_sum(right), tf.reduce_sum(real)

    def inspected(self, batch):
        outputs = self.inspected_model.on_batch(batch, training=False)
        return {**{name: values for name, values in batch.items() if name != REPLACEMENT_DRAWS},
                "discriminator_input_ids": outputs.discriminator_input_ids,
                "replaced": tf.where(outputs.replaced, outputs.discriminator_input_ids, IGNORE_INDEX)}

    def validation(self, strategy, model, tokenizer, shards: ShardSet, per_replica_batch_size: int, seed: int, *,
                   on_tpu: bool) -> Validation:
        masker = self.with_draws(self.make_masker(tokenizer, None, validation=True))
        return ReplacedTokenValidation(strategy, model, shards, per_replica_batch_size, masker, seed,
                                       jit_compile=on_tpu)

    def card_words(self, model, tokenizer) -> CardWords:
        family = "a DeBERTa-v3" if "Deberta" in type(model).__name__ else "an ELECTRA"
        if type(model).__name__.endswith("ForMaskedLM"):
            return CardWords("fill-mask", f"the generator of {family} pretraining run, a small masked language model "
                             f"{self.how_trained()} beside its discriminator (the folder above)",
                             f"Paris is the {tokenizer.mask_token or '[MASK]'} of France.", "python -m mlm_tpu.predict",
                             scores=SCORE_NAMES)
        return CardWords("feature-extraction", f"{family} discriminator {self.how_trained()} by replaced-token "
                         "detection, an encoder to fine-tune (its generator is in generator/)",
                         "Paris is the capital of France.", "", scores=SCORE_NAMES)

    def how_trained(self) -> str:
        """How the cards say the models were trained: from scratch, or continued from a checkpoint."""
        return f"continued from {self.continued_from}" if self.continued_from else "pretrained from scratch"

    def card_facts(self, model, tokenizer, **run) -> CardFacts:
        return CardFacts.of_model(self, model.discriminator, tokenizer, **run)

    def save_model(self, folder: str, model, tokenizer, facts, records, name: str) -> None:
        save_electra_folders(folder, model, tokenizer, facts, facts.about(self, model.generator, tokenizer), records,
                             name)

    def load_saved_model(self, name_or_path: str, model_class=None, flag: str = "--model"):
        return load_electra_folders(name_or_path, flag)
