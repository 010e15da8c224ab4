"""What a run that continues a checkpoint must refuse before it writes anything: shards longer than the checkpoint's
positions (TensorFlow failed at the first step, `indices[0,32] = 33 is not in [0, 18)`, leaving training_args.json
and logs/ behind), and an --output-dir that is the checkpoint itself (the run saved over the weights it continues,
so the same command, run again, continued another checkpoint).

The checkpoints are tiny models of few positions, saved in this process; the runs are the real command in this
process (`in_process`): one error line, exit 2, no output folder."""

import shutil

import pytest

from conftest import REPO_ROOT, assert_user_error

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "made-by-0.2"
SHARDS, TOKENIZER = FIXTURES / "shards", FIXTURES / "tokenizer"  # 32-token rows, 300 pieces
POSITIONS = 16  # fewer than the shards' 32 tokens


def with_tokenizer(folder):
    for path in TOKENIZER.iterdir():
        if path.name != "tokenizer_training.json":
            shutil.copy(path, folder / path.name)
    return folder


@pytest.fixture(scope="module")
def short_checkpoints(tmp_path_factory):
    """{task: a checkpoint folder of that task whose model reads 16 tokens}: a RoBERTa masked LM saved as 🤗 saves
    one (TensorFlow weights), and an ELECTRA discriminator with its generator/ as --task electra saves them."""
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras, before TensorFlow loads)
    from transformers import ElectraConfig, RobertaConfig, TFRobertaForMaskedLM

    from mlm_tpu.electra.model import ElectraPretrainer
    from mlm_tpu.electra.presets import generator_config
    from mlm_tpu.tokenizer.load import load_tokenizer
    from test_electra import save_as_trained

    tokenizer = load_tokenizer(str(TOKENIZER))
    folder = tmp_path_factory.mktemp("short")
    shape = dict(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                 intermediate_size=32, pad_token_id=tokenizer.pad_token_id)
    roberta = TFRobertaForMaskedLM(RobertaConfig(**shape, max_position_embeddings=POSITIONS + 2, type_vocab_size=1,
                                                 architectures=["RobertaForMaskedLM"]))
    roberta(roberta.dummy_inputs)
    roberta.save_pretrained(folder / "roberta")
    discriminator = ElectraConfig(**shape, embedding_size=16, max_position_embeddings=POSITIONS)
    save_as_trained(folder / "electra", ElectraPretrainer.from_configs(generator_config(discriminator, 0.5),
                                                                      discriminator, 50.0), tokenizer)
    return {"mlm": with_tokenizer(folder / "roberta"), "electra": folder / "electra"}


@pytest.mark.parametrize("task", ["mlm", "electra"])
def test_shards_longer_than_the_checkpoint_reads_are_refused_before_anything_is_written(task, short_checkpoints,
                                                                                        tmp_path, in_process):
    checkpoint, output_dir = short_checkpoints[task], tmp_path / "out"
    result = in_process("train", "--task", task, "--model-name-or-path", checkpoint, "--train-dataset",
                        SHARDS / "train", "--eval-dataset", SHARDS / "validation", "--per-replica-batch-size", 4,
                        "--max-steps", 1, "--output-dir", output_dir)
    assert_user_error(result, "--train-dataset holds 32-token examples, longer than --model-name-or-path "
                      f"{checkpoint} reads ({POSITIONS} tokens); shard with --max-length {POSITIONS} or less")
    assert not output_dir.exists()


def tree(folder):
    """Every file under `folder` with its bytes."""
    return {path.relative_to(folder): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.mark.parametrize("task", ["mlm", "sequence-classification"])
def test_an_output_dir_that_is_the_checkpoint_it_continues_is_refused_and_left_as_it_was(task, tmp_path, in_process):
    """However it is spelled (here with a trailing /.), and for any task that starts from --model-name-or-path."""
    checkpoint = shutil.copytree(FIXTURES / "roberta", tmp_path / "checkpoint")
    before = tree(checkpoint)
    result = in_process("train", "--task", task, "--model-name-or-path", checkpoint, "--train-dataset",
                        SHARDS / "train", "--per-replica-batch-size", 4, "--max-steps", 1, "--output-dir",
                        f"{checkpoint}/.")
    assert_user_error(result, f"--output-dir {checkpoint}/. is --model-name-or-path {checkpoint}: the run would save "
                      "over the checkpoint it continues", "give another --output-dir")
    assert tree(checkpoint) == before


def backup_of(folder, base):
    """A backup's record in `folder`/backup, of a run whose settings say it started from `base`."""
    import json

    (folder / "backup").mkdir()
    (folder / "backup" / "step-2.json").write_text(json.dumps(
        {"format": 2, "loop": {}, "files": {}, "settings": {"model_name_or_path": str(base)}}))


def test_a_folder_is_continued_in_place_only_when_it_is_that_runs_own_resumable_output(tmp_path):
    """A backup there of a run started from this very folder is that run, resumed: it goes on; a backup of a run
    started from another checkpoint is not."""
    from mlm_tpu.errors import UserError
    from mlm_tpu.tasks import TrainingConfig
    from mlm_tpu.training.checks import check_not_in_place

    checkpoint, other = (shutil.copytree(FIXTURES / "roberta", tmp_path / name) for name in ("checkpoint", "other"))
    config = TrainingConfig(str(SHARDS / "train"), str(checkpoint), model_name_or_path=str(checkpoint))
    with pytest.raises(UserError, match="is --model-name-or-path"):
        check_not_in_place(config)
    backup_of(checkpoint, other)
    with pytest.raises(UserError, match="is --model-name-or-path"):
        check_not_in_place(config)
    shutil.rmtree(checkpoint / "backup")
    backup_of(checkpoint, checkpoint)
    check_not_in_place(config)
