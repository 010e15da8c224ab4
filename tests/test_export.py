"""Model folders the rest of the ecosystem loads: PyTorch-layout safetensors beside tf_model.h5, a model card,
and `python -m mlm_tpu.export` for folders made without them."""

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_user_error, pytorch_python, run_module

pytestmark = pytest.mark.slow  # trains models (the session's fixtures)

FIXTURES = Path(__file__).parent / "fixtures" / "made-by-0.2"
ROBERTA_INPUT = "The game was released in Japan ."
T5_INPUT = "quality: The company said its first quarter results were excellent ."


def without_tf_weights(folder: Path, target: Path) -> Path:
    """A copy of the folder holding model.safetensors but no tf_model.h5."""
    shutil.copytree(folder, target, ignore=shutil.ignore_patterns("tf_model.h5", "logs", "backup"))
    assert (target / "model.safetensors").is_file()
    return target


def logits(model_class, folder, tokenizer_folder, text):
    from transformers import AutoTokenizer

    from mlm_tpu.model_folder.loading import load_model

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder)
    model = load_model(str(folder), model_class)  # transformers' PyTorch-checkpoint loader when no tf_model.h5
    inputs = tokenizer([text], return_tensors="tf")
    if model.config.model_type == "t5":
        inputs["decoder_input_ids"] = inputs["input_ids"][:, :4]
    return model(**inputs).logits.numpy()


def assert_names_are_transformers_mapping(folder: Path, model) -> None:
    from safetensors import safe_open
    from transformers.modeling_tf_pytorch_utils import convert_tf_weight_name_to_pt_weight_name

    with safe_open(str(folder / "model.safetensors"), framework="numpy") as stream:
        assert stream.metadata() == {"format": "pt"}
        names = set(stream.keys())
    assert names == {convert_tf_weight_name_to_pt_weight_name(w.name, tf_weight_shape=w.shape)[0] for w in model.weights}


@pytest.mark.parametrize("fixture, model_class_name, text", [
    ("trained_mlm", "TFAutoModelForMaskedLM", ROBERTA_INPUT),
    ("trained_classifier", "TFT5ForConditionalGeneration", T5_INPUT),
    ("trained_copier", "TFT5ForConditionalGeneration", "copy: one two three"),
])
def test_the_pytorch_weights_alone_load_into_tensorflow_and_give_the_same_logits(fixture, model_class_name, text,
                                                                                  request, tmp_path):
    """Through transformers' PyTorch-checkpoint loader (no PyTorch needed), every parameter under the name
    transformers' mapping gives it, tied embeddings once."""
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras, before TensorFlow loads)
    import transformers

    folder = request.getfixturevalue(fixture)[0]
    model_class = getattr(transformers, model_class_name)
    copy = without_tf_weights(folder, tmp_path / "pt-only")
    original = logits(model_class, folder, folder, text)
    np.testing.assert_allclose(logits(model_class, copy, folder, text), original, rtol=1e-5, atol=1e-5)
    assert_names_are_transformers_mapping(copy, model_class.from_pretrained(folder, use_safetensors=False))


@pytest.mark.parametrize("fixture, pt_class_name, text", [
    ("trained_mlm", "RobertaForMaskedLM", ROBERTA_INPUT),
    ("trained_classifier", "T5ForConditionalGeneration", T5_INPUT),
    ("trained_copier", "T5ForConditionalGeneration", "copy: one two three"),
])
def test_transformers_pytorch_classes_load_the_folder_with_no_key_missing_and_the_same_logits(
        fixture, pt_class_name, text, request, tmp_path):
    python = pytorch_python()
    import mlm_tpu  # noqa: F401
    import transformers
    from transformers import AutoTokenizer

    folder = request.getfixturevalue(fixture)[0]
    inputs = {name: value.numpy() for name, value in AutoTokenizer.from_pretrained(folder)([text], return_tensors="tf").items()}
    if pt_class_name.startswith("T5"):
        inputs["decoder_input_ids"] = inputs["input_ids"][:, :4]
    tf_class = "TFAutoModelForMaskedLM" if pt_class_name == "RobertaForMaskedLM" else "TFT5ForConditionalGeneration"
    model = getattr(transformers, tf_class).from_pretrained(folder, use_safetensors=False)
    np.savez(tmp_path / "inputs.npz", logits=model(**inputs).logits.numpy(), **inputs)
    result = subprocess.run([python, str(Path(__file__).parent / "pytorch_check.py"), str(folder), pt_class_name,
                             str(tmp_path / "inputs.npz")], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["missing"] == [] and found["unexpected"] == [], found
    assert found["max_abs_diff"] < 1e-4, found


def read_card(folder: Path):
    from huggingface_hub import ModelCard

    return ModelCard.load(folder / "README.md")


def test_the_card_is_hub_metadata_with_the_tokenizers_mask_token_and_the_runs_figures(trained_mlm):
    folder, run = trained_mlm
    card = read_card(folder)
    assert card.data.library_name == "transformers" and card.data.pipeline_tag == "fill-mask"
    assert {"mlm_tpu", "roberta", "mlm"} <= set(card.data.tags)
    assert card.data.widget == [{"text": "Paris is the [MASK] of France."}]  # the tokenizer's own mask token
    last = run.stderr.split("Epoch 3 validation: ")[1].splitlines()[0]  # loss L, perplexity P, masked accuracy A%
    loss, perplexity = last.split(", ")[0].split()[1], last.split(", ")[1].split()[1]
    assert f"| {loss} | {perplexity} |" in card.text  # the figures the run printed for the saved epoch
    assert "![training and validation loss](loss.png)" in card.text and (folder / "loss.png").is_file()
    assert 'pipeline("fill-mask"' in card.text and "TFRobertaForMaskedLM.from_pretrained" in card.text


def test_a_t5_card_says_its_task_labels_and_prefix(trained_classifier):
    card = read_card(trained_classifier[0])
    assert card.data.pipeline_tag == "text2text-generation"
    assert card.data.widget[0]["text"].startswith("quality:")
    assert "**Labels**: good, high, low" in card.text and "| accuracy |" in card.text


def test_export_of_a_tf_only_folder_made_elsewhere(tmp_path):
    """tf_model.h5 + config.json + tokenizer files, as the 🤗 TPU example (and mlm_tpu 0.2) saved them."""
    source = tmp_path / "tf-only"
    shutil.copytree(FIXTURES / "roberta", source, ignore=shutil.ignore_patterns("logs", "training_args.json"))
    result = run_module("mlm_tpu.export", "--model", source, "--output-dir", tmp_path / "exported")
    assert result.returncode == 0, result.stderr[-3000:]
    exported = tmp_path / "exported"
    assert {"model.safetensors", "README.md", "tf_model.h5", "config.json", "tokenizer.json"} <= \
        {path.name for path in exported.iterdir()}
    assert sorted(path.name for path in source.iterdir()) == sorted(path.name for path in (FIXTURES / "roberta").iterdir()
                                                                    if path.name not in ("logs", "training_args.json"))
    import mlm_tpu  # noqa: F401
    from transformers import TFAutoModelForMaskedLM

    only_pt = without_tf_weights(exported, tmp_path / "pt-only")
    np.testing.assert_allclose(logits(TFAutoModelForMaskedLM, only_pt, source, ROBERTA_INPUT),
                               logits(TFAutoModelForMaskedLM, source, source, ROBERTA_INPUT), rtol=1e-5, atol=1e-5)
    assert read_card(exported).data.widget == [{"text": "Paris is the [MASK] of France."}]

    (exported / "notes.txt").write_text("mine\n")
    again = run_module("mlm_tpu.export", "--model", source, "--output-dir", exported)
    assert_user_error(again, "already holds", "--overwrite")
    again = run_module("mlm_tpu.export", "--model", source, "--output-dir", exported, "--overwrite")  # the same model
    assert again.returncode == 0, again.stderr[-3000:]
    assert (exported / "notes.txt").read_text() == "mine\n"


def test_bad_input_is_one_line_and_leaves_nothing_half_written(tmp_path, in_process):
    not_a_model = tmp_path / "empty"
    not_a_model.mkdir()
    assert_user_error(in_process("export", "--model", not_a_model), "not a model folder", "config.json")

    strange = tmp_path / "strange"
    shutil.copytree(FIXTURES / "roberta", strange, ignore=shutil.ignore_patterns("logs"))
    config = json.loads((strange / "config.json").read_text())
    (strange / "config.json").write_text(json.dumps({**config, "model_type": "rwkv5x",
                                                     "architectures": ["TFRwkv5xForMaskedLM"]}))
    assert_user_error(in_process("export", "--model", strange, "--output-dir", tmp_path / "o1"),
                      "no PyTorch class")
    assert not (tmp_path / "o1").exists()

    other = tmp_path / "other"
    shutil.copytree(FIXTURES / "t5-classifier", other, ignore=shutil.ignore_patterns("logs"))
    before = sorted(path.name for path in other.iterdir())
    assert_user_error(in_process("export", "--model", FIXTURES / "roberta", "--output-dir", other),
                      "holds another model")
    assert sorted(path.name for path in other.iterdir()) == before and not (other / "model.safetensors").exists()


def card_sections(folder: Path) -> dict:
    """What a card says of the run: its validation table, loss plot and corpus lines."""
    text = read_card(folder).text
    return {"validation": text.split("## Validation")[1].split("##")[0] if "## Validation" in text else None,
            "loss plot": "![training and validation loss](loss.png)" in text,
            "corpus": [line for line in text.splitlines() if line.startswith("- **Corpus**")]}


def test_export_in_place_into_a_trainer_folder_keeps_what_its_card_says(trained_mlm, tmp_path):
    folder = shutil.copytree(trained_mlm[0], tmp_path / "model")
    before = card_sections(folder)
    assert before["validation"] and before["loss plot"] and "not recorded" not in before["corpus"][0]
    assert_user_error(run_module("mlm_tpu.export", "--model", folder), "already holds", "--overwrite")
    result = run_module("mlm_tpu.export", "--model", folder, "--overwrite")
    assert result.returncode == 0, result.stderr[-3000:]
    assert card_sections(folder) == before

    exported = tmp_path / "exported"
    result = run_module("mlm_tpu.export", "--model", folder, "--output-dir", exported)
    assert result.returncode == 0, result.stderr[-3000:]
    assert card_sections(exported) == before and (exported / "loss.png").is_file()
    assert read_card(exported).text.startswith(read_card(folder).text.split("# model")[0])  # the same metadata
    assert "# exported" in read_card(exported).text


def test_export_keeps_the_card_of_an_earlier_versions_trainer(trained_mlm, tmp_path):
    """mlm_tpu 0.3 kept no record and no facts beside its card: the export cannot say what it said, so keeps it."""
    folder = shutil.copytree(trained_mlm[0], tmp_path / "model", ignore=shutil.ignore_patterns(".*"))
    card = (folder / "README.md").read_bytes()
    result = run_module("mlm_tpu.export", "--model", folder, "--overwrite")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (folder / "README.md").read_bytes() == card and "model card, by an earlier mlm_tpu, is kept" in result.stderr
