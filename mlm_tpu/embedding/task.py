"""`--task sentence-embedding`: an encoder (--model-name-or-path: any folder that holds one; or --model-config from
scratch) fine-tuned contrastively on (query, positive, hard negatives) shards (`shard --task sentence-embedding`)
into a sentence-transformers model.

The loss is in-batch negatives over the global batch (loss.py); with --grad-cache-mini-batch-size, GradCache
(grad_cache.py). Gradient accumulation would shrink the negatives to a micro-batch, so it is refused, naming
GradCache. Each epoch, validation ranks every query of the validation split against the split's positives
(validation.py). The folder is saved with sentence-transformers' files (modules.json, 1_Pooling/, the similarity
function), so `SentenceTransformer(folder)` embeds as mlm_tpu does.
"""

from types import SimpleNamespace
from typing import Dict, Optional

import tensorflow as tf

from mlm_tpu.console import log
from mlm_tpu.embedding.encoder import TextEmbedder, base_class, encoder_from_scratch, pretrained_encoder
from mlm_tpu.embedding.grad_cache import cached_ranking
from mlm_tpu.embedding.loss import Embedded, in_batch_hits, ranking_loss
from mlm_tpu.embedding.validation import SCORES, PairScorer
from mlm_tpu.encoder.models import check_encoder
from mlm_tpu.errors import UserError
from mlm_tpu.model_folder.card import CardWords
from mlm_tpu.model_folder.pooling import CLASSIFIER_POOLINGS, MEAN, saved_pooling, write_sentence_transformers_files
from mlm_tpu.shards.reading import ShardSet
from mlm_tpu.training.evaluation import PredictionValidation
from mlm_tpu.training.task import (BestMetric, Task, Validation, check_length, check_one_start, refuse_masking,
                                   run_tokenizer)

DEFAULT_PRESET = "base"
SIMILARITY = "cosine"  # what the loss trains and sentence-transformers' similarity() computes


def check_global_batch(config, replicas: int) -> None:
    """In-batch negatives need another row in the batch: a global batch of 1 has no negative (without hard ones)."""
    if config.per_replica_batch_size * replicas < 2:
        raise UserError(f"--task sentence-embedding takes the rest of the global batch as each query's negatives: a "
                        f"global batch of {config.per_replica_batch_size * replicas} has none; raise "
                        "--per-replica-batch-size to 2 or more (the larger, the more negatives)")


class SentenceEmbeddingTask(Task):
    """Contrastive fine-tuning of a bare encoder, pooled into one vector per text."""

    accuracy_name = "in_batch_accuracy"  # queries whose positive scores highest among the global batch's documents
    token_features = ("input_ids", "positive_input_ids", "negative_input_ids")

    def __init__(self, name: str, declared=None):
        super().__init__(name, declared)
        self.settings = None
        self.embedder: Optional[TextEmbedder] = None
        self.length = 0  # tokens per text

    @property
    def model_class(self):
        return base_class()

    def check_base(self, base_config, where: str) -> None:
        check_encoder(base_config, base_class(), where)

    def check(self, config) -> None:
        super().check(config)
        check_one_start(config, "a pretrained encoder")
        if config.gradient_accumulation_steps > 1:
            raise UserError(f"--gradient-accumulation-steps {config.gradient_accumulation_steps} would score each "
                            "query against a micro-batch only (fewer negatives, another loss); for a batch larger "
                            "than memory use GradCache, --grad-cache-mini-batch-size N, which computes the whole "
                            "batch's loss and gradients N texts at a time")
        if config.embedding_pooling not in (None, *CLASSIFIER_POOLINGS):
            raise UserError(f"--embedding-pooling must be {' or '.join(CLASSIFIER_POOLINGS)}, not "
                            f"'{config.embedding_pooling}'")
        self.settings = config

    def load_tokenizer(self, config):
        return run_tokenizer(config)

    def features(self, max_length: Optional[int], max_target_length: Optional[int]) -> Dict[str, Optional[int]]:
        return self.split_kind.features(max_length)

    def prepare(self, config, tokenizer, train: ShardSet, evaluation: Optional[ShardSet]) -> None:
        self.length = train.features["input_ids"]
        if config.max_length and config.max_length != self.length:
            raise UserError(f"--train-dataset holds {self.length}-token texts, not --max-length {config.max_length}; "
                            f"pass --max-length {self.length} or re-shard")
        negatives = train.features["negative_input_ids"] // self.length
        if evaluation and evaluation.features["input_ids"] != self.length:
            raise UserError(f"--eval-dataset holds {evaluation.features['input_ids']}-token texts, "
                            f"--train-dataset {self.length}-token ones; shard both with the same --max-length")
        hard = f" and {negatives} hard negative{'s' * (negatives != 1)} per row" if negatives else ""
        cached = config.grad_cache_mini_batch_size
        log(f"Each query is scored against the global batch's positives{hard}"
            f"{', symmetric loss' if config.symmetric_loss else ''} (cosine x {config.similarity_scale:g})"
            f"{f'; GradCache, {cached} texts at a time' if cached else ''}")

    def build_model(self, config, tokenizer, train: ShardSet):
        check_global_batch(config, tf.distribute.get_strategy().num_replicas_in_sync)
        if config.model_name_or_path:
            model = pretrained_encoder(config.model_name_or_path)
        else:
            model = encoder_from_scratch(config.model_config or DEFAULT_PRESET, tokenizer, train.length,
                                         config.config_overrides)
        check_length(model.config, self.length, config.model_name_or_path or "the model",
                     f"--train-dataset holds {self.length}-token texts", "shard with")
        pooling = config.embedding_pooling or (saved_pooling(config.model_name_or_path)
                                               if config.model_name_or_path else None) or MEAN
        self.embedder = TextEmbedder(model, pooling)
        log(f"A text's vector is {self.embedder.words} (--embedding-pooling {pooling})")
        return model

    def make_transform(self, tokenizer):
        """A split without hard negatives holds them as empty features ([rows, 0]), which a batch must not carry to
        the device (TensorFlow's CPU kernels crash on them): they are dropped in the input pipeline."""
        def without_empty_features(batch_number, batch):
            return {name: values for name, values in batch.items() if values.shape[-1] != 0}

        return lambda seed: without_empty_features

    def training_outputs(self, model, batch: Dict, training: bool):
        config = self.settings
        queries, query_mask = batch["input_ids"], batch["attention_mask"]
        rows, length = queries.shape[0], queries.shape[1]
        negatives = batch["negative_input_ids"].shape[1] // length if "negative_input_ids" in batch else 0
        texts = [(queries, query_mask), (batch["positive_input_ids"], batch["positive_attention_mask"])]
        texts += [(batch["negative_input_ids"][:, index * length:(index + 1) * length],
                   batch["negative_attention_mask"][:, index * length:(index + 1) * length])
                  for index in range(negatives)]
        if config.grad_cache_mini_batch_size:
            ranking = cached_ranking(lambda ids, mask: self.embedder(ids, mask, training=False),
                                     tf.concat([ids for ids, _ in texts], 0), tf.concat([mask for _, mask in texts], 0),
                                     rows, config.grad_cache_mini_batch_size, config.similarity_scale,
                                     config.symmetric_loss)
        else:  # each text's rows apart: keyed dropout draws the noise of a replica's rows (training/dropout.py)
            embedded = [self.embedder(ids, mask, training=training) for ids, mask in texts]
            ranking = ranking_loss(Embedded(embedded[0], embedded[1], tf.concat(embedded[2:], 0) if negatives else
                                            tf.zeros([0, embedded[0].shape[1]], embedded[0].dtype)),
                                   config.similarity_scale, config.symmetric_loss)
        return SimpleNamespace(loss=ranking.loss, ranking=ranking)

    def loss_weights(self, batch: Dict):
        return tf.cast(tf.shape(batch["input_ids"])[:1], tf.float32)

    def training_counts(self, outputs, batch: Dict):
        hits = in_batch_hits(outputs.ranking)
        return tf.reduce_sum(tf.cast(hits, tf.float32)), tf.cast(tf.size(hits), tf.float32)

    def prepare_evaluation(self, config, model, tokenizer, shards: ShardSet) -> None:
        refuse_masking(config, f"{config.model} is a sentence-embedding model")
        self.embedder = TextEmbedder(model, saved_pooling(config.model))

    def load_saved_model(self, name_or_path: str, model_class=None, flag: str = "--model"):
        from mlm_tpu.tokenizer.load import load_tokenizer

        return pretrained_encoder(name_or_path, flag), load_tokenizer(name_or_path, flag)

    def validation(self, strategy, model, tokenizer, shards: ShardSet, per_replica_batch_size: int, seed: int, *,
                   on_tpu: bool) -> Validation:
        return PredictionValidation(strategy, model, PairScorer(self.embedder), shards, per_replica_batch_size,
                                    jit_compile=on_tpu)

    def best_metric(self, config) -> Optional[BestMetric]:
        return None  # every epoch is saved over the last: a score picked on a split and reported there is optimistic

    def card_words(self, model, tokenizer) -> CardWords:
        return CardWords("sentence-similarity", "a sentence-embedding model (sentence-transformers), fine-tuned "
                         "contrastively with in-batch negatives", "A man is playing a guitar.",
                         "mlm-tpu predict embed", (), dict(SCORES))

    def save_model(self, folder: str, model, tokenizer, facts, records: Dict[str, dict], name: str) -> None:
        """The model folder, and sentence-transformers' files beside it (its pooling, its similarity function)."""
        from mlm_tpu.model_folder.saving import write_model_files
        from mlm_tpu.output_dir import MODEL_FOLDER, staged_output_dir

        with staged_output_dir(folder, folders=MODEL_FOLDER.folders) as staging:
            write_model_files(staging, folder, model, tokenizer, facts, records, name)
            write_sentence_transformers_files(staging, model.config, facts.max_length or self.length or None,
                                              self.embedder.pooling, SIMILARITY)
