"""Continued pretraining (a pretraining task given --model-name-or-path): the checkpoint's own validation before the
first step, in the log, the run's result, training_args.json and the card, which names the checkpoint it continued;
and what a user may get wrong, each one `error:` line with nothing written in --output-dir.

The checkpoint is mlm_tpu 0.2's tiny RoBERTa (tests/fixtures), with the shards made with its tokenizer."""

import contextlib
import io
import json
import shutil
from pathlib import Path
from typing import Sequence, Tuple

import pytest

from conftest import REPO_ROOT, run_module

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "made-by-0.2"
SHARDS = FIXTURES / "shards"
HUB_NAME = "someone/tiny-roberta"  # what the checkpoint's training_args.json says it was pushed as


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """The tiny RoBERTa, as mlm_tpu left it after pushing it to the Hub as HUB_NAME."""
    folder = shutil.copytree(FIXTURES / "roberta", tmp_path_factory.mktemp("base") / "roberta")
    info = json.loads((folder / "training_args.json").read_text())
    (folder / "training_args.json").write_text(json.dumps({**info, "hub_model_id": HUB_NAME}))
    return folder


@pytest.fixture(scope="module")
def continued(base, tmp_path_factory) -> Tuple[object, str, Path]:
    """(TrainingResult, log, output folder) of 4 steps of continued pretraining of `base`, run in this process."""
    import mlm_tpu

    output_dir = tmp_path_factory.mktemp("continued") / "model"
    log = io.StringIO()
    with contextlib.redirect_stderr(log):
        result = mlm_tpu.train_model(str(SHARDS / "train"), str(output_dir), model_name_or_path=str(base),
                                     eval_dataset=str(SHARDS / "validation"), per_replica_batch_size=8, max_steps=4)
    return result, log.getvalue(), output_dir


@pytest.mark.slow
def test_a_continued_run_scores_the_checkpoint_as_loaded_before_its_first_step(continued, base):
    """The figures are the checkpoint's own: what `evaluate` finds for it on the same shards, with the same masks."""
    import mlm_tpu

    result, log, output_dir = continued
    before = result.before_training
    expected = mlm_tpu.evaluate_model(str(base), str(SHARDS / "validation"), per_replica_batch_size=8).scores
    assert before.keys() == expected.keys()
    for name, value in expected.items():
        assert before[name] == pytest.approx(value, rel=1e-6), name
    line = (f"Before training (the checkpoint as loaded): loss {before['loss']:.4f}, perplexity "
            f"{before['perplexity']:.2f}, masked accuracy {before['masked_accuracy']:.2%}")
    assert line in log and log.index(line) < log.index("Epoch 1 training")
    assert before != result.epochs[-1]["validation"]  # four steps moved it
    run = json.loads((output_dir / "training_args.json").read_text())["run"]
    assert run["validation_before_training"] == before


@pytest.mark.slow
def test_the_card_names_the_checkpoint_and_shows_its_figures_beside_the_final_ones(continued, base):
    result, _, output_dir = continued
    card = (output_dir / "README.md").read_text()
    metadata = card.split("---")[1]
    assert f"base_model: {HUB_NAME}\n" in metadata
    assert f"A masked language model by continued pretraining of {base}, trained with mlm_tpu" in card
    assert "pretrained from scratch" not in card and f"- **Started from**: {base}\n" in card
    before, after = result.before_training, result.epochs[-1]["validation"]
    assert (f"| {base}, as loaded | {before['loss']:.4f} | {before['perplexity']:.2f} | "
            f"{before['masked_accuracy']:.2%} |") in card
    assert (f"| after 4 steps of continued pretraining | {after['loss']:.4f} | {after['perplexity']:.2f} | "
            f"{after['masked_accuracy']:.2%} |") in card


@pytest.mark.slow
def test_an_export_of_the_folder_keeps_what_its_card_says_of_the_checkpoint(continued, tmp_path):
    """The export writes the card again from the facts the trainer kept beside it: the base and the figures too."""
    _, _, output_dir = continued
    exported = tmp_path / "exported"
    result = run_module("mlm_tpu.export", "--model", str(output_dir), "--output-dir", str(exported))
    assert result.returncode == 0, result.stderr[-3000:]
    card, original = (exported / "README.md").read_text(), (output_dir / "README.md").read_text()
    assert f"base_model: {HUB_NAME}\n" in card and "Started from" in card
    assert card.split("## Validation")[1].split("##")[0] == original.split("## Validation")[1].split("##")[0]


@pytest.mark.slow
def test_the_log_says_the_schedule_starts_on_the_checkpoint_with_the_learning_rate_as_its_peak(continued, base):
    _, log, _ = continued
    assert (f"linear schedule (from step 0 on the weights of --model-name-or-path {base}, peak 0.0001, warm-up 0.05 "
            "of the steps)") in log


def test_the_cards_base_model_is_a_hub_name_never_a_local_path(base, tmp_path):
    """The Hub refuses a `base_model` that names no model there: a local folder is named by what it was pushed as,
    if it records it, and is otherwise left out of the metadata (as transformers' own cards do)."""
    from mlm_tpu.model_folder.card import hub_name

    assert hub_name("FacebookAI/roberta-base") == "FacebookAI/roberta-base"
    assert hub_name(str(base)) == HUB_NAME
    assert hub_name(str(FIXTURES / "roberta")) is None  # pushed nowhere (hub_model_id null)
    assert hub_name(str(tmp_path)) is None  # records nothing
    assert hub_name("gs://bucket/model") is None and hub_name(None) is None


# Bad input: each refused in one line, before --output-dir exists.

def train_in_process(arguments: Sequence[str], capsys) -> Tuple[int, str]:
    """`mlm-tpu train arguments`, through the wrapper a shell user goes through; (exit code, stderr)."""
    from mlm_tpu.cli import run_command
    from mlm_tpu.cli.main import main

    try:
        run_command(main, ["train", *map(str, arguments)])
        code = 0
    except SystemExit as stop:
        code = stop.code
    return code, capsys.readouterr().err


def assert_refused(arguments: Sequence[str], output_dir: Path, capsys, *phrases: str) -> str:
    code, err = train_in_process([*arguments, "--output-dir", output_dir], capsys)
    assert code == 2, err[-3000:]
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    for phrase in phrases:
        assert phrase in errors[0], f"{phrase!r} not in {errors[0]!r}"
    assert not output_dir.exists(), f"{output_dir} was written"
    return errors[0]


def continue_flags(base, shards: Path = SHARDS, *more) -> list:
    return ["--train-dataset", shards / "train", "--model-name-or-path", base, "--per-replica-batch-size", 8,
            "--max-steps", 1, *more]


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """A name that looks like a Hub model must not wait for the network."""
    import huggingface_hub.constants
    import transformers.utils.hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(transformers.utils.hub, "_is_offline_mode", True)


def test_shards_made_with_another_tokenizer_say_which_to_shard_with(shards, tmp_path, capsys):
    """Without --tokenizer the run reads with the checkpoint's own, which did not make these shards."""
    base = FIXTURES / "roberta"
    assert_refused(continue_flags(base, shards), tmp_path / "out", capsys,
                   f"the shards in {shards / 'train'} were made with another tokenizer than the tokenizer of "
                   f"--model-name-or-path {base}", f"(`mlm-tpu shard --tokenizer {base} ...`)")


def test_a_causal_lm_is_refused(tmp_path, capsys):
    from transformers import GPT2Config, TFGPT2LMHeadModel

    model = TFGPT2LMHeadModel(GPT2Config(vocab_size=300, n_positions=64, n_embd=16, n_layer=1, n_head=2))
    model(model.dummy_inputs)
    model.save_pretrained(tmp_path / "gpt2")
    assert_refused(continue_flags(tmp_path / "gpt2"), tmp_path / "out", capsys,
                   f"--model-name-or-path {tmp_path / 'gpt2'}", "gpt2", "--task mlm")


def test_a_t5_is_refused(tmp_path, capsys):
    base = FIXTURES / "t5-classifier"
    assert_refused(continue_flags(base), tmp_path / "out", capsys, "--task mlm needs a base of one of the types",
                   f"--model-name-or-path {base} is a t5 model")


def test_a_folder_without_weights_is_refused(tmp_path, capsys):
    base = shutil.copytree(FIXTURES / "roberta", tmp_path / "base", ignore=shutil.ignore_patterns("tf_model.h5"))
    assert_refused(continue_flags(base), tmp_path / "out", capsys, f"--model-name-or-path {base} holds no weights",
                   "copy the folder again with its weights")


def test_a_truncated_safetensors_file_is_refused(tmp_path, capsys):
    """A PyTorch-only folder (as most Hub models are) whose model.safetensors was cut short by a copy."""
    from transformers import TFAutoModelForMaskedLM

    from mlm_tpu.model_folder.pytorch import save_pytorch_weights

    from mlm_tpu.mlm.continued import continued_masked_lm
    from mlm_tpu.tokenizer.load import load_tokenizer

    base = shutil.copytree(FIXTURES / "roberta", tmp_path / "base", ignore=shutil.ignore_patterns("tf_model.h5"))
    original = TFAutoModelForMaskedLM.from_pretrained(FIXTURES / "roberta")
    save_pytorch_weights(original, str(base))
    config = json.loads((base / "config.json").read_text())  # PyTorch positions as TensorFlow's, as export sets them
    (base / "config.json").write_text(json.dumps({**config, "pad_token_id": 1}))
    loaded = continued_masked_lm(str(base), load_tokenizer(str(base), "--tokenizer"))  # whole, it loads
    assert [weight.numpy().tolist() for weight in loaded.weights] == [weight.numpy().tolist()
                                                                      for weight in original.weights]
    weights = base / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    assert_refused(continue_flags(base), tmp_path / "out", capsys, f"--model-name-or-path {base}: its "
                   "model.safetensors is not a readable safetensors file", "copy the checkpoint again")


def test_a_model_config_beside_the_checkpoint_is_refused(tmp_path, capsys):
    base = FIXTURES / "roberta"
    assert_refused(continue_flags(base, SHARDS, "--model-config", "tiny"), tmp_path / "out", capsys,
                   "--model-config gives the shape of a model trained from scratch",
                   f"--model-name-or-path {base} continues one of its own shape", "--config-overrides")


def test_a_tokenizer_larger_than_the_checkpoints_vocabulary_is_refused(wikitext_tokenizer, shards, tmp_path, capsys):
    """A checkpoint without tokenizer files of its own takes --tokenizer, but not one with ids past its embeddings."""
    base = shutil.copytree(FIXTURES / "roberta", tmp_path / "base",
                           ignore=shutil.ignore_patterns("tokenizer*", "special*"))
    tokenizer = wikitext_tokenizer[0]
    assert_refused(continue_flags(base, shards, "--tokenizer", tokenizer), tmp_path / "out", capsys,
                   f"the tokenizer has 2,000 tokens but {base} only 300 embeddings", f"{base} holds no tokenizer",
                   "give the --tokenizer it was pretrained with (at most 300 pieces)")
