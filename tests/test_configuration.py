"""Typed configs: built from dicts and files, checked in one place, written back as they were read."""

import dataclasses
import json
from pathlib import Path

import pytest

from mlm_tpu.cli.train import FLAGS, build_config, build_parser
from mlm_tpu.configuration import check_ranges, from_dict, read_config_file, to_dict
from mlm_tpu.errors import UserError
from mlm_tpu.tasks import TrainingConfig
from mlm_tpu.training.config import EvaluationConfig, HardwareConfig

from conftest import assert_user_error

FIXTURES = Path(__file__).parent / "fixtures"


def config_from(*flags):
    return build_config(build_parser().parse_args([str(flag) for flag in flags]))


def test_a_config_written_out_reads_back_equal():
    config = TrainingConfig("shards/train", "runs/x", task="classification", labels=("low", "high"), learning_rate=3e-3,
                            hardware=HardwareConfig(tpu="local", cpu_replicas=2))
    assert from_dict(TrainingConfig, json.loads(json.dumps(to_dict(config))), "test") == config


def test_flags_override_the_file_which_overrides_the_defaults(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("train_dataset: shards/train\noutput_dir: runs/a\nlearning_rate: 1e-3\nnum_epochs: 4\n"
                    "hardware:\n  cpu_replicas: 2\n", encoding="utf-8")
    config = config_from("--config", path, "--num-epochs", 7, "--bf16")
    assert (config.learning_rate, config.num_epochs, config.hardware.cpu_replicas, config.hardware.bf16) == \
        (1e-3, 7, 2, True)  # YAML's 1e-3 is text; it is read as the number it means
    assert config.per_replica_batch_size == TrainingConfig.per_replica_batch_size  # the dataclass default


def test_the_old_head_flag_still_picks_the_task():
    assert config_from("--train-dataset", "t", "--output-dir", "o", "--head", "t5", "--task", "generation").task == \
        "generation"
    assert config_from("--train-dataset", "t", "--output-dir", "o", "--head", "mlm").task == "mlm"
    with pytest.raises(UserError, match="--head t5 needs --task"):
        config_from("--train-dataset", "t", "--output-dir", "o", "--head", "t5")


@pytest.mark.parametrize("values, phrase", [
    ({"train_dataset": "t", "output_dir": "o", "learning_rat": 0.1}, "unknown setting 'learning_rat' (did you mean "
                                                                      "'learning_rate'?)"),
    ({"train_dataset": "t", "output_dir": "o", "hardware": {"tpus": "x"}}, "unknown setting 'tpus'"),
    ({"train_dataset": "t", "output_dir": "o", "num_epochs": "many"}, "'num_epochs' (--num-epochs) must be a whole"),
    ({"train_dataset": "t", "output_dir": "o", "labels": "low"}, "must be a list of texts"),
    ({"output_dir": "o"}, "--train-dataset is required"),
])
def test_bad_settings_are_named(values, phrase):
    with pytest.raises(UserError) as error:
        from_dict(TrainingConfig, values, "run.json")
    assert phrase in str(error.value)


@pytest.mark.parametrize("field, value, phrase", [
    ("learning_rate", float("nan"), "--learning-rate must be above 0 and at most 10, not nan"),
    ("learning_rate", -1.0, "--learning-rate must be above 0"),
    ("seed", -1, "--seed must be at least 0"),
    ("shuffle_buffer_size", 0, "--shuffle-buffer-size must be at least 1"),
    ("mlm_probability", 1.0, "--mlm-probability must be above 0 and below 1"),
])
def test_numbers_out_of_range_name_their_flag(field, value, phrase):
    config = TrainingConfig("t", "o", **{field: value})
    with pytest.raises(UserError, match=phrase.replace("(", r"\(")):
        check_ranges(config)


def test_nested_ranges_are_checked_too():
    with pytest.raises(UserError, match="--cpu-replicas must be at least 1 and at most 64, not 0"):
        check_ranges(EvaluationConfig("m", "e", hardware=HardwareConfig(cpu_replicas=0)))


@pytest.mark.parametrize("text, suffix, phrase", [
    ('{"train_dataset": "t",', ".json", "is not valid JSON (line 1"),
    ("train_dataset: [t\n", ".yaml", "is not valid YAML"),
    ('["a list"]', ".json", "must hold a mapping of settings"),
])
def test_a_malformed_file_is_one_line(tmp_path, text, suffix, phrase):
    path = tmp_path / f"run{suffix}"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match=phrase.replace("(", r"\(")):
        read_config_file(str(path))


@pytest.mark.parametrize("content, phrase", [
    ('{"train_dataset": "t", "output_dir": "o", "epochs": 3}', "unknown setting 'epochs'"),
    ('{"train_dataset": "t", "output_dir": "o"', "is not valid JSON"),
])
def test_train_refuses_a_bad_config_file_in_one_line(tmp_path, content, phrase, in_process):
    path = tmp_path / "run.json"
    path.write_text(content, encoding="utf-8")
    assert_user_error(in_process("train", "--config", path), phrase)


def test_every_training_setting_has_a_flag():
    """What a config file can say, the command line can say too (and the reverse)."""
    parser = build_parser()
    flagged = {action.dest[len("config."):] for action in parser._actions if action.dest.startswith("config.")}
    fields = {name for name, value in to_dict(TrainingConfig("t", "o")).items() if not isinstance(value, dict)}
    fields |= {f"hardware.{name}" for name in to_dict(HardwareConfig())}
    assert flagged == fields
    assert FLAGS.config_class is TrainingConfig


BEFORE_REGISTRY = FIXTURES / "before-registry"


def test_the_flags_generated_from_the_settings_are_the_hand_written_ones():
    """Every flag of train as the hand-written parser made it (names, 🤗 underscore aliases, dest, default, choices,
    nargs, type, help with its default, metavar, action), now generated from the fields' metadata."""
    def described(action):
        return {"flags": action.option_strings, "dest": action.dest, "default": repr(action.default),
                "choices": repr(action.choices), "nargs": repr(action.nargs),
                "type": getattr(action.type, "__name__", repr(action.type)), "help": action.help,
                "metavar": action.metavar, "action": type(action).__name__, "const": action.const}

    before = json.loads((BEFORE_REGISTRY / "train-flags.json").read_text(encoding="utf-8"))
    now = [described(action) for action in build_parser()._actions if action.dest != "help"]
    assert sorted(now, key=lambda flag: flag["dest"]) == sorted(before, key=lambda flag: flag["dest"])


@pytest.mark.parametrize("file", ["training_args.json", "lora_training_args.json"])
def test_a_flat_training_args_json_written_before_the_registry_replays(file):
    """The flat file of a run made before the settings moved into their task's and method's folders reads back as
    the run it records, and is written back flat, key for key; a setting added since (--classifier-pooling) is at
    its default."""
    written = json.loads((BEFORE_REGISTRY / file).read_text(encoding="utf-8"))
    config = config_from("--config", BEFORE_REGISTRY / file)
    settings = {key: value for key, value in written.items() if key != "run"}
    replayed, defaults = to_dict(config), to_dict(TrainingConfig("t", "o"))
    assert {key: replayed[key] for key in settings} == settings
    assert {key: value for key, value in replayed.items() if key not in settings} == {
        key: defaults[key] for key in replayed if key not in settings}
    assert config_from("--config", BEFORE_REGISTRY / file, "--num-epochs", 5).num_epochs == 5


@pytest.mark.parametrize("flags, phrase", [
    (["--task", "mlm", "--labels", "a", "b"], "--labels is a setting of --task classification, not of --task mlm; "
                                              "drop --labels"),
    (["--task", "sequence-classification", "--max-new-tokens", "5"],
     "--max-new-tokens is a setting of --task generation, not of --task sequence-classification"),
    (["--task", "electra", "--metric-for-best-model", "loss"],
     "--metric-for-best-model is a setting of --task classification and --task generation and --task "
     "sequence-classification and --task token-classification"),
    (["--task", "span-corruption", "--dense-mlm-head"], "--dense-mlm-head is a setting of --task mlm and --task "
                                                        "electra, not of --task span-corruption"),
    (["--lora-rank", "4"], "--lora-rank is a setting of --delta lora, not of a run without --delta (every weight "
                           "trains); drop --lora-rank, or add --delta lora"),
])
def test_a_flag_of_another_task_or_method_is_refused_in_one_line_naming_whose_it_is(tmp_path, flags, phrase,
                                                                                   in_process):
    result = in_process("train", "--train-dataset", tmp_path / "none", "--output-dir", tmp_path / "out", *flags)
    assert_user_error(result, phrase)
    assert result.returncode == 2 and not (tmp_path / "out").exists()


def test_each_task_and_method_declares_its_settings_once_and_the_config_holds_them_all():
    from mlm_tpu.configuration import key_of
    from mlm_tpu.delta import METHOD_SETTINGS, METHODS, method_class
    from mlm_tpu.tasks import TASK_SETTINGS, TASKS

    held = {field.name for field in dataclasses.fields(TrainingConfig)}
    for settings in (*TASK_SETTINGS.values(), *METHOD_SETTINGS.values()):
        assert {key_of(field) for field in dataclasses.fields(settings)} <= held
    assert METHODS == ("lora", "ia3", "prompt", "prefix", "adapter")  # --delta's choices, in --help's order
    assert [method_class(name).of(TrainingConfig("t", "o", delta=name)).name for name in METHODS] == list(METHODS)
    assert build_parser()._option_string_actions["--task"].choices == TASKS


def test_the_head_maps_derive_from_the_declared_heads_as_they_were_written():
    from mlm_tpu.delta.peft_names import head_task_type
    from mlm_tpu.tasks import HEADS, PIPELINES

    assert HEADS == {"ElectraForPreTraining": "electra", "ForSequenceClassification": "sequence-classification",
                     "ForTokenClassification": "token-classification"}
    assert PIPELINES == {"text-classification": "sequence-classification",
                         "token-classification": "token-classification"}
    assert (head_task_type("TFBertForSequenceClassification"), head_task_type("TFAutoModelForTokenClassification"),
            head_task_type("TFRobertaForMaskedLM")) == ("SEQ_CLS", "TOKEN_CLS", None)


def test_a_backup_made_before_the_registry_resumes_and_a_changed_task_setting_is_named():
    """A resume compares the settings its backup recorded (flat, by the flags' names) with its own: those of the
    run's replayed training_args.json are the same; a task setting changed since is named by its flag."""
    from mlm_tpu.training.run_settings import check_resumed_settings, result_settings

    recorded = json.loads((BEFORE_REGISTRY / "backup-settings.json").read_text(encoding="utf-8"))
    shards = recorded["train_shards"]

    def resumed(config):
        current = result_settings(config, recorded["global_batch_size"], [name for name, _ in shards],
                                  [count for _, count in shards])
        return check_resumed_settings(config, recorded, current, 8, "runs/seq-killed", [])

    config = config_from("--config", BEFORE_REGISTRY / "training_args.json")
    assert resumed(config) == []
    with pytest.raises(UserError, match="^--metric-for-best-model was 'macro_f1' in the backup at step 8 and is "
                                        "'accuracy' now: resuming would"):
        resumed(dataclasses.replace(config, metric_for_best_model="accuracy"))
