"""Loads that run no one's code (CVE-2026-4372): a config.json that names a Hub kernel repository in its attention
implementation is refused by every command that reads a model, before anything imports or fetches what it names; a
checkpoint's own `auto_map` never reaches a folder mlm_tpu writes (its mean-pooled classifier's own stays:
test_classifier_pooling.py)."""

import json
import shutil
from pathlib import Path

import pytest

from conftest import MAX_LENGTH, assert_user_error

EVIL_MODULE = '''"""Writes a marker file when imported: a test's proof that no one imported it."""
from pathlib import Path

Path(__file__).with_name("IMPORTED").write_text("imported")


class EvilModel:
    pass
'''
AUTO_MAP = {"AutoConfig": "modeling_evil.EvilModel", "AutoModelForMaskedLM": "modeling_evil.EvilModel"}
TINY_BERT = {"model_type": "bert", "architectures": ["BertForMaskedLM"], "vocab_size": 64, "hidden_size": 16,
             "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32}


def naming_code(folder: Path, values: dict) -> Path:
    """`folder` holding a config.json with `values` and the module its auto_map names, which marks its import."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({**values, "auto_map": AUTO_MAP}))
    (folder / "modeling_evil.py").write_text(EVIL_MODULE)
    return folder


def commands(model: Path, shards: Path, tokenizer: Path, output: Path) -> dict:
    """Every command that reads a model, given `model`."""
    return {"train": ["train", "--model-name-or-path", model, "--train-dataset", shards / "train", "--tokenizer",
                      tokenizer, "--max-length", MAX_LENGTH, "--output-dir", output / "train"],
            "evaluate": ["evaluate", "--model", model, "--eval-dataset", shards / "validation"],
            "predict": ["predict", "--model", model, "The [MASK] sat."],
            "export": ["export", "--model", model, "--output-dir", output / "export"],
            "downstream": ["downstream", "--model", model, "--tasks", "rotten-tomatoes", "--seeds", 1,
                           "--output-dir", output / "downstream"]}


@pytest.mark.parametrize("field, value", [("_attn_implementation_internal", "kernels-community/evil"),
                                          ("_attn_implementation_internal", "sdpa"),
                                          ("attn_implementation", "kernels-community/evil")])
def test_a_config_naming_a_kernel_repository_is_refused_by_every_command_and_nothing_is_imported(
        field, value, tmp_path, shards, wikitext_tokenizer, in_process):
    model = naming_code(tmp_path / "model", {**TINY_BERT, field: value})
    for command, arguments in commands(model, shards, wikitext_tokenizer[0], tmp_path / "out").items():
        result = in_process(*arguments)
        line = assert_user_error(result, field, "CVE-2026-4372", str(model))
        assert not (model / "IMPORTED").exists(), (command, line)
        assert not (tmp_path / "out").exists(), command  # refused before anything was written
    result = in_process("train", "--model-config", model / "config.json", "--train-dataset", shards / "train",
                        "--tokenizer", wikitext_tokenizer[0], "--max-length", MAX_LENGTH, "--output-dir",
                        tmp_path / "out")
    assert_user_error(result, "--model-config", field)
    assert not (model / "IMPORTED").exists() and not (tmp_path / "out").exists()


def test_an_attention_implementation_by_name_is_no_repository_and_loads(tmp_path, in_process):
    """`attn_implementation: "sdpa"` names no code (no "/"): the folder is read as before (here: it has no weights,
    the next thing export checks)."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({**TINY_BERT, "attn_implementation": "sdpa"}))
    assert_user_error(in_process("export", "--model", model, "--output-dir", tmp_path / "out"),
                      "holds no TensorFlow weights")


@pytest.mark.slow
def test_a_foreign_auto_map_reaches_no_folder_that_a_save_or_export_writes(trained_mlm, tmp_path, in_process):
    """A checkpoint whose auto_map names its own module (there, and never imported): the folder the trainer's save
    writes of it (as a run continued from it saves: its config read from the checkpoint), and its export, name no
    code."""
    from transformers import TFAutoModelForMaskedLM

    from mlm_tpu.model_folder.loading import load_pretrained
    from mlm_tpu.tasks import plug_in_of_saved_model

    base = tmp_path / "base"
    shutil.copytree(trained_mlm[0], base, ignore=shutil.ignore_patterns("backup", "logs", ".*"))
    values = json.loads((base / "config.json").read_text())
    naming_code(base, values)
    model, tokenizer = load_pretrained(str(base), TFAutoModelForMaskedLM)
    assert model.config.auto_map == AUTO_MAP  # what transformers reads, and the trainer would save
    task = plug_in_of_saved_model(str(base))
    task.save_model(str(tmp_path / "saved"), model, tokenizer, task.card_facts(model, tokenizer, epoch=1), {},
                    "saved")
    exported = in_process("export", "--model", base, "--output-dir", tmp_path / "exported")
    assert exported.returncode == 0, exported.stderr[-3000:]
    for folder in (tmp_path / "saved", tmp_path / "exported"):
        saved = json.loads((folder / "config.json").read_text())
        assert "auto_map" not in saved and saved["model_type"] == values["model_type"], folder
    assert not (base / "IMPORTED").exists()
