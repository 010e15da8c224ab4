"""Fast checks of what the end-to-end runs exercise: feature specs, model configs fitted to tokenizers, the
scores over positions that take a loss, and the tasks' plug-ins."""

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras, before TensorFlow loads)
from mlm_tpu.errors import UserError
from mlm_tpu.encoder.shard_kinds import SEQUENCE_CLASSIFICATION_ROWS, TOKEN_CLASSIFICATION_ROWS
from mlm_tpu.mlm.shard_kind import MASKED_LM
from mlm_tpu.shards.format import IGNORE_INDEX, MLM, TEXT2TEXT, feature_lengths, shard_name, SHARD_COUNT
from mlm_tpu.t5.shard_kinds import SPAN_CORRUPTION_ROWS, TEXT2TEXT_ROWS
from mlm_tpu.tasks import shard_kinds

FIXTURES = Path(__file__).parent / "fixtures" / "made-by-0.2"


def test_each_kind_of_split_has_its_features():
    assert MASKED_LM.features(128) == {"input_ids": 128, "attention_mask": 128}
    assert TEXT2TEXT_ROWS.features(512, 8) == {"input_ids": 512, "attention_mask": 512, "labels": 8}
    assert SPAN_CORRUPTION_ROWS.features(568) == {"input_ids": 568}
    assert SEQUENCE_CLASSIFICATION_ROWS.features(64) == {"input_ids": 64, "attention_mask": 64, "token_type_ids": 64,
                                                         "labels": 1}
    assert TOKEN_CLASSIFICATION_ROWS.features(64)["labels"] == 64
    for kind in (MASKED_LM, TEXT2TEXT_ROWS, SPAN_CORRUPTION_ROWS):  # the kinds older shards without a manifest hold
        assert shard_kinds().holding(kind.features(8, 8)) is kind


def test_names_carry_their_counts_as_the_reference_regex_reads_them():
    assert SHARD_COUNT.search(shard_name("dataset", 12, 999)).group(1) == "999"


def test_manifests_of_every_version_say_their_kind_and_lengths():
    manifest = json.loads((FIXTURES / "t5-shards" / "train" / "manifest.json").read_text())
    assert shard_kinds().of_manifest(manifest) is TEXT2TEXT_ROWS
    assert feature_lengths(manifest) == {"input_ids": 16, "attention_mask": 16, "labels": 4}
    old = {"settings": {"max_length": 64}, "features": {"input_ids": "int64", "attention_mask": "int64"}}  # 0.1
    assert shard_kinds().of_manifest(old) is MASKED_LM and feature_lengths(old) == {"input_ids": 64, "attention_mask": 64}


def test_a_masked_lm_config_is_fitted_to_the_tokenizer_and_the_length():
    from transformers import AutoTokenizer

    from mlm_tpu.mlm.presets import config_for

    tokenizer = AutoTokenizer.from_pretrained(FIXTURES / "tokenizer")
    config = config_for("tiny", tokenizer, 32)
    assert (config.vocab_size, config.bos_token_id, config.eos_token_id) == (
        len(tokenizer), tokenizer.cls_token_id, tokenizer.sep_token_id)
    # TensorFlow's RoBERTa numbers positions from a padding index of 1 whatever the tokenizer pads with (3 in this
    # tokenizer of mlm_tpu 0.2); PyTorch's from pad_token_id: 1 makes them agree
    assert tokenizer.pad_token_id == 3 and config.pad_token_id == 1
    assert config.max_position_embeddings == 512  # the preset's default table already covers 32 + pad + 1
    assert config_for("tiny", tokenizer, 1024).max_position_embeddings == 1024 + 1 + 1
    with pytest.raises(UserError, match="is a T5 configuration"):
        config_for(str(FIXTURES / "t5-classifier" / "config.json"), tokenizer, 32)


def test_bert_presets_have_the_shapes_of_turc_et_al_and_any_familys_config_is_fitted_by_its_own_rules(tmp_path,
                                                                                                      capsys):
    """BERT, ALBERT, DistilBERT and DeBERTa-v2 number positions from 0 (RoBERTa's family from its padding index + 1),
    keep their own padding id, and have token types only where the family has them."""
    from transformers import AutoTokenizer

    from mlm_tpu.mlm.presets import config_for

    tokenizer = AutoTokenizer.from_pretrained(FIXTURES / "tokenizer")  # pads with id 3, Unigram
    shapes = {name: (config.model_type, config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
                     config.intermediate_size)
              for name in ("bert-tiny", "bert-mini", "bert-small", "bert-medium", "bert-base")
              for config in [config_for(name, tokenizer, 32)]}
    assert shapes == {"bert-tiny": ("bert", 2, 128, 2, 512), "bert-mini": ("bert", 4, 256, 4, 1024),
                      "bert-small": ("bert", 4, 512, 8, 2048), "bert-medium": ("bert", 8, 512, 8, 2048),
                      "bert-base": ("bert", 12, 768, 12, 3072)}
    bert = config_for("bert-tiny", tokenizer, 1024)
    assert (bert.pad_token_id, bert.max_position_embeddings, bert.type_vocab_size) == (3, 1024, 1)
    assert "pads with id 3" not in capsys.readouterr().err  # only RoBERTa's family needs pad id 1
    families = {"distilbert": dict(dim=64, n_layers=1, n_heads=2, hidden_dim=128),
                "albert": dict(embedding_size=16, hidden_size=64, num_attention_heads=2, intermediate_size=128),
                "deberta-v2": dict(hidden_size=64, num_attention_heads=2, intermediate_size=128, type_vocab_size=0)}
    for model_type, values in families.items():
        (tmp_path / f"{model_type}.json").write_text(json.dumps({"model_type": model_type, **values}))
    distilbert, albert, deberta = (config_for(str(tmp_path / f"{name}.json"), tokenizer, 1024) for name in families)
    assert (distilbert.max_position_embeddings, distilbert.vocab_size) == (1024, len(tokenizer))
    assert not hasattr(distilbert, "type_vocab_size")
    assert (albert.embedding_size, albert.type_vocab_size, albert.max_position_embeddings) == (16, 1, 1024)
    assert (deberta.type_vocab_size, deberta.max_position_embeddings) == (0, 1024)


def test_a_family_tensorflow_trains_no_masked_lm_of_is_one_line():
    from transformers import AutoConfig

    from mlm_tpu.mlm.presets import check_masked_lm_type

    for model_type in ("bert", "distilbert", "deberta-v2", "roberta"):
        check_masked_lm_type(AutoConfig.for_model(model_type), "--model-config x.json")
    with pytest.raises(UserError, match="gpt2 model; --task mlm trains masked LMs"):
        check_masked_lm_type(AutoConfig.for_model("gpt2"), "--model-config x.json")
    with pytest.raises(UserError, match="TFXLMWithLMHeadModel.*computes no masked-LM loss"):
        check_masked_lm_type(AutoConfig.for_model("xlm"), "--model-name-or-path x")


def test_the_masked_lm_template_has_robertas_layout_so_the_config_pads_with_the_tokenizers_pad(capsys):
    from transformers import AutoTokenizer

    from mlm_tpu.mlm.presets import config_for
    from mlm_tpu.tokenizer.templates import as_transformers_tokenizer
    from mlm_tpu.tokenizer.unigram import train_unigram

    corpus = [["the cat sat on the mat", "a dog ran in the park", "the sun is up"] * 20]
    tokenizer = as_transformers_tokenizer(train_unigram(lambda: iter(corpus), 60, show_progress=False), 512)
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in ("[CLS]", "<pad>", "[SEP]", "<unk>", "[MASK]")}
    assert ids == {"[CLS]": 0, "<pad>": 1, "[SEP]": 2, "<unk>": 3, "[MASK]": 4}  # <s> <pad> </s> <unk>, as RoBERTa
    assert (tokenizer.cls_token_id, tokenizer.pad_token_id, tokenizer.sep_token_id, tokenizer.unk_token_id,
            tokenizer.mask_token_id) == (0, 1, 2, 3, 4)
    assert tokenizer("the cat")["input_ids"][::len(tokenizer("the cat")["input_ids"]) - 1] == [0, 2]
    config = config_for("tiny", tokenizer, 32)
    assert (config.pad_token_id, config.bos_token_id, config.eos_token_id) == (1, 0, 2)
    assert "warning" not in capsys.readouterr().err
    old = config_for("tiny", AutoTokenizer.from_pretrained(FIXTURES / "tokenizer"), 32)  # mlm_tpu 0.2: pad 3
    assert old.pad_token_id == 1 and "pads with id 3" in capsys.readouterr().err


def test_a_config_file_of_any_name_is_read(tmp_path):
    from transformers import AutoTokenizer

    from mlm_tpu.mlm.presets import config_for

    path = tmp_path / "my-shape.json"
    path.write_text(json.dumps({"model_type": "roberta", "hidden_size": 16, "num_hidden_layers": 1,
                                "num_attention_heads": 2, "intermediate_size": 32}))
    config = config_for(str(path), AutoTokenizer.from_pretrained(FIXTURES / "tokenizer"), 32)
    assert (config.hidden_size, config.num_hidden_layers) == (16, 1)


def test_a_t5_config_decodes_from_pad_and_stops_at_eos():
    from transformers import AutoTokenizer

    from mlm_tpu.t5.presets import config_for

    tokenizer = AutoTokenizer.from_pretrained(FIXTURES / "t5-tokenizer")
    config = config_for("t5-tiny", tokenizer)
    assert (config.vocab_size, config.decoder_start_token_id, config.pad_token_id, config.eos_token_id) == (
        len(tokenizer), tokenizer.pad_token_id, tokenizer.pad_token_id, tokenizer.eos_token_id)
    with pytest.raises(UserError, match="no pad or eos token"):
        config_for("t5-tiny", AutoTokenizer.from_pretrained(FIXTURES / "tokenizer"))  # the masked-LM template's


class FixedLogits:
    """A model whose logits are given: token_sums only calls it and reads .logits."""

    def __init__(self, logits):
        self.logits = logits

    def __call__(self, **batch):
        return self


def test_scores_count_only_the_positions_that_take_a_loss():
    import tensorflow as tf

    from mlm_tpu.training.evaluation import token_scores, token_sums

    logits = tf.constant([[[2.0, 0.0, 0.0], [0.0, 3.0, 0.0]], [[0.0, 0.0, 1.0], [5.0, 0.0, 0.0]]])
    labels = tf.constant([[0, IGNORE_INDEX], [1, IGNORE_INDEX]])  # two scored positions: one right, one wrong
    sums = {name: float(value) for name, value in token_sums(FixedLogits(logits), {"labels": labels}).items()}
    log_softmax = tf.nn.log_softmax(logits).numpy()
    expected_loss = -(log_softmax[0, 0, 0] + log_softmax[1, 0, 1])
    assert sums["tokens"] == 2 and sums["hits"] == 1 and sums["loss"] == pytest.approx(expected_loss, rel=1e-6)
    scores = token_scores(sums, "masked_accuracy", "masked_tokens")
    assert scores == pytest.approx({"masked_tokens": 2, "loss": expected_loss / 2,
                                    "perplexity": math.exp(expected_loss / 2), "masked_accuracy": 0.5})


@pytest.mark.parametrize("task, kind, setting, owners", [
    ("mlm", MLM, "labels", "--task classification"), ("classification", TEXT2TEXT, "mlm_probability",
                                                      "--task mlm and --task electra"),
    ("generation", TEXT2TEXT, "max_predictions_per_seq", "--task mlm and --task electra"),
    ("generation", TEXT2TEXT, "dense_mlm_head", "--task mlm and --task electra"),
    ("classification", TEXT2TEXT, "masking", "--task mlm and --task electra"),
    ("mlm", MLM, "max_target_length", "--task classification and --task generation"),
    ("electra", MLM, "metric_for_best_model", "--task classification and --task generation and --task "
                                              "sequence-classification and --task token-classification")])
def test_each_task_reads_its_kind_of_shards_and_refuses_the_others_settings(task, kind, setting, owners):
    from mlm_tpu.tasks import check_settings, make_task
    from mlm_tpu.tasks import TrainingConfig

    plug_in = make_task(task)
    assert plug_in.shard_kind == kind and plug_in.features(8, 4) == shard_kinds().kinds[kind].features(8, 4)
    value = {"labels": ("a", "b"), "mlm_probability": 0.2, "max_predictions_per_seq": 20, "dense_mlm_head": True,
             "masking": "span", "max_target_length": 8, "metric_for_best_model": "loss"}
    flag = f"--{setting.replace('_', '-')}"
    with pytest.raises(UserError, match=f"^{flag} is a setting of {owners}, not of --task {task}; drop {flag}$"):
        check_settings(TrainingConfig("t", "o", task=task, **{setting: value[setting]}))
    check_settings(TrainingConfig("t", "o", task=task))  # the defaults (dense_mlm_head False among them) are not "set"
    plug_in.check(TrainingConfig("t", "o", task=task))


@pytest.mark.parametrize("task", ["mlm", "electra"])  # ELECTRA's generator: a masked-LM head too
def test_the_dense_head_has_no_prediction_slots_to_set(task):
    from mlm_tpu.tasks import make_task
    from mlm_tpu.tasks import TrainingConfig

    with pytest.raises(UserError, match="drop one of --dense-mlm-head and --max-predictions-per-seq"):
        make_task(task).check(TrainingConfig("t", "o", task=task, dense_mlm_head=True, max_predictions_per_seq=20))


@pytest.mark.parametrize("task", ["classification", "generation", "sequence-classification", "token-classification"])
def test_a_fine_tuning_task_starts_from_weights_or_from_a_shape_not_both(task):
    from mlm_tpu.tasks import make_task
    from mlm_tpu.tasks import TrainingConfig

    for shape in ({"model_config": "small"}, {"config_overrides": "num_layers=2"}):
        with pytest.raises(UserError, match="or --model-config/--config-overrides \\(from scratch\\), not both"):
            make_task(task).check(TrainingConfig("t", "o", task=task, model_name_or_path="base", **shape))


def test_a_nan_score_is_the_worst_so_the_next_real_score_is_kept_over_it():
    """A run that diverged in an epoch scores NaN there; a later epoch with a real score must replace it as the best
    (`value > NaN` alone is false for ever), and a NaN never replaces a real score."""
    from mlm_tpu.training.task import BestMetric

    nan = float("nan")
    for metric, better, worse in ((BestMetric("accuracy"), 0.6, 0.4), (BestMetric("loss", False), 0.4, 0.6)):
        assert metric.improves(worse, nan) and metric.improves(better, nan)
        assert not metric.improves(nan, worse) and not metric.improves(nan, nan)
        assert metric.improves(nan, None)  # the first epoch is kept, whatever it scored
        assert metric.improves(better, worse) and not metric.improves(worse, better)
        assert not metric.improves(better, better)


def test_an_encoder_keeps_the_best_mean_of_scores_named_with_commas_never_averaging_the_loss():
    from mlm_tpu.encoder.models import Labels
    from mlm_tpu.tasks import TrainingConfig, make_task

    task = make_task("sequence-classification")
    task.labels = Labels(["no", "yes"], "single_label_classification")
    task.check_best_metric("f1,accuracy")
    metric = task.best_metric(TrainingConfig("t", "o", task=task.name, metric_for_best_model="f1,accuracy"))
    assert metric.higher_is_better and metric.value({"f1": 0.5, "accuracy": 0.8, "loss": 2.0}) == pytest.approx(0.65)
    with pytest.raises(UserError, match="the loss falls as the other scores rise"):
        task.check_best_metric("f1,loss")
    with pytest.raises(UserError, match=r"\(or several, comma-separated: their mean\), not pearson"):
        task.check_best_metric("accuracy,pearson")


SETTINGS_OF_SOME_TASKS = {"mlm_probability": 0.2, "masking": "whole-word", "mask_replace_prob": 0.5,
                          "random_replace_prob": 0.15, "dense_mlm_head": True, "max_predictions_per_seq": 20,
                          "generator_size_ratio": 0.5, "discriminator_weight": 10.0, "labels": ("a", "b"),
                          "max_target_length": 8, "max_new_tokens": 8, "model_name_or_path": "roberta-base",
                          "metric_for_best_model": "loss", "classifier_pooling": "mean",
                          "generator_name_or_path": "google/electra-small-generator", "keep_epoch": "last",
                          "eval_mlm_probability": 0.15, "mlm_probability_schedule": ("0.3:10", "0.15:1000000"),
                          "new_embeddings": "mean", "embedding_sharing": "shared", "embedding_pooling": "cls",
                          "similarity_scale": 10.0, "symmetric_loss": True, "grad_cache_mini_batch_size": 4}


def test_every_task_takes_or_refuses_in_one_line_each_setting_of_the_others():
    from mlm_tpu.tasks import TASK_SETTINGS, TASKS, check_settings, make_task
    from mlm_tpu.tasks import TrainingConfig

    declared = {field.name for settings in TASK_SETTINGS.values() for field in dataclasses.fields(settings)}
    assert set(SETTINGS_OF_SOME_TASKS) == declared | {"model_name_or_path"}  # a trunk setting the masked LMs refuse
    takes = {name: set() for name in SETTINGS_OF_SOME_TASKS}
    for task in TASKS:
        for name, value in SETTINGS_OF_SOME_TASKS.items():
            try:
                config = TrainingConfig("t", "o", task=task, **{name: value})
                check_settings(config)
                make_task(task).check(config)
                takes[name].add(task)
            except UserError:  # one line, not a crash
                pass
    assert takes["generator_size_ratio"] == takes["discriminator_weight"] == {"electra"}
    assert takes["mlm_probability"] == takes["dense_mlm_head"] == takes["max_predictions_per_seq"] == {"mlm", "electra"}
    assert takes["masking"] == takes["mask_replace_prob"] == takes["random_replace_prob"] == {"mlm", "electra"}
    assert takes["labels"] == {"classification"}
    assert takes["classifier_pooling"] == {"sequence-classification"}
    assert takes["model_name_or_path"] == set(TASKS)  # every task continues or fine-tunes a checkpoint
    assert "electra" not in takes["metric_for_best_model"]
    assert takes["eval_mlm_probability"] == takes["mlm_probability_schedule"] == {"mlm", "electra"}
    assert takes["keep_epoch"] == {"sequence-classification", "token-classification"}
    assert takes["embedding_sharing"] == {"electra"}
    assert (takes["embedding_pooling"] == takes["similarity_scale"] == takes["symmetric_loss"]
            == takes["grad_cache_mini_batch_size"] == {"sentence-embedding"})
    # electra's, refused alone everywhere: it names the generator of the --model-name-or-path it continues
    assert takes["generator_name_or_path"] == set()
    # refused alone everywhere too: it says how the --model-name-or-path it continues grows to a larger tokenizer
    assert takes["new_embeddings"] == set()
    alone = {"generator_name_or_path", "new_embeddings"}
    assert all(taken for name, taken in takes.items() if name not in alone), takes  # some task's


def test_a_batch_decodes_to_the_model_inputs_as_written():
    from mlm_tpu.shards.pipeline import evaluation_batches
    from mlm_tpu.shards.reading import find_shards

    shards = find_shards(str(FIXTURES / "t5-shards" / "validation"), shard_kinds(), TEXT2TEXT,
                         TEXT2TEXT_ROWS.features(None, None))
    batch = next(iter(evaluation_batches(shards, 32, None)))
    assert {name: (tensor.shape, tensor.dtype.name) for name, tensor in batch.items()} == {
        "input_ids": ((32, 16), "int32"), "attention_mask": ((32, 16), "int32"), "labels": ((32, 4), "int32")}
    rows = batch["attention_mask"].numpy().any(axis=1)
    assert rows.sum() == 20 and np.all(batch["labels"].numpy()[~rows] == IGNORE_INDEX)  # filler rows take no loss
