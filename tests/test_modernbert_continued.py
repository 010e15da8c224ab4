"""A ModernBERT saved by transformers 5 (PyTorch-only safetensors) continued with the real train.py (issue 50): the
score it records before the first step is transformers 5's own loss on the same masked validation batches (1e-4),
and its output folder loads back in transformers 5 with mlm_tpu's logits (1e-4). Packing asked of rows no longer
than the tokenizer's frame of special tokens is refused; inspect shows a ModernBERT's packed rows with their documents.

mlm_tpu validates a ModernBERT on packed rows with each document kept to itself (the family's default); transformers
has no packing, so its side runs each document of those rows alone, a row of its own, with the same ids, masks and
labels. A packed document gets the logits it gets alone (tests/test_modernbert.py), so the two losses are one
function's. The PyTorch side is tests/modernbert_check.py, under MLM_TPU_PYTORCH_PYTHON.
"""

import json

import numpy as np
import pytest

from conftest import MAX_LENGTH, assert_user_error, pytorch_python, run_train
from test_model_families import small_modernbert_folder
from test_modernbert import run_check

SEED = 7  # the run's, so its validation masks are reproduced here
BATCH = 8
TOLERANCE = 1e-4
# made by transformers 5: 3 layers (global, local, local), a window of 16 under the 64-token rows
SHAPE = {"model_type": "modernbert", "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 3,
         "num_attention_heads": 2, "local_attention": 16, "max_position_embeddings": 128}
COMPARED_DOCUMENTS = 32  # the trained model's logits are compared on these (vocabulary-wide logits are large)


def validation_documents(base, validation, pad_id: int) -> dict:
    """train.py's validation batches of `base` (its masker and seed, its batches of BATCH, the family's document
    ids), remade as evaluate makes them, cut into their documents, one per row (padded with `pad_id`): input_ids,
    attention_mask and labels (-100 where unmasked)."""
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.tasks import plug_in_of_saved_model
    from mlm_tpu.training.config import EvaluationConfig
    import tensorflow as tf

    task = plug_in_of_saved_model(str(base))
    model, tokenizer = task.load_saved_model(str(base))
    shards = find_shards(str(validation), task.shard_kinds, task.shard_kind, task.features(None, None),
                         "--eval-dataset")
    config = EvaluationConfig(model=str(base), eval_dataset=str(validation), per_replica_batch_size=BATCH, seed=SEED)
    task.prepare_evaluation(config, model, tokenizer, shards)
    runner = task.validation(tf.distribute.get_strategy(), model, tokenizer, shards, BATCH, SEED, on_tpu=False).runner
    batches = iter(runner.dataset)
    rows = {"input_ids": [], "attention_mask": [], "labels": []}
    for _ in range(runner.steps):
        batch = {name: value.numpy() for name, value in next(batches).items()}
        assert "document_ids" in batch  # validated as packed documents, as train.py's log says
        for row in range(BATCH):
            real = batch["attention_mask"][row].astype(bool)
            for document in np.unique(batch["document_ids"][row][real]):
                where = real & (batch["document_ids"][row] == document)
                for name, filler in (("input_ids", pad_id), ("attention_mask", 0), ("labels", -100)):
                    values = batch[name][row][where]
                    rows[name].append(np.pad(values, (0, MAX_LENGTH - len(values)), constant_values=filler))
    return {name: np.stack(values).astype(np.int64) for name, values in rows.items()}  # torch takes int64 labels


@pytest.mark.slow
def test_modernbert_saved_by_transformers_5_scores_its_own_loss_and_continues(shards, wikitext_tokenizer, tmp_path):
    """Continued by the real train.py: its score before the first step is transformers 5's loss on the same masked
    tokens, and transformers 5 loads the folder it saved, every key used, with its logits."""
    from transformers import TFAutoModelForMaskedLM

    from mlm_tpu.model_folder.loading import load_pretrained
    from mlm_tpu.tokenizer.load import load_tokenizer

    python = pytorch_python()  # skips at once without one
    base, output_dir = tmp_path / "pt5-modernbert", tmp_path / "continued"
    (tmp_path / "shape.json").write_text(json.dumps(SHAPE))
    run_check(python, "make-masked-lm", tmp_path / "shape.json", wikitext_tokenizer[0], base)
    assert not list(base.glob("*.h5"))  # PyTorch's weights alone
    result = run_train("--task", "mlm", "--model-name-or-path", base, "--tokenizer", base,
                       "--train-dataset", shards / "train", "--eval-dataset", shards / "validation",
                       "--max-length", MAX_LENGTH, "--per-replica-batch-size", BATCH, "--seed", SEED,
                       "--max-steps", 2, "--output-dir", output_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Packed rows: each document attends only to itself" in result.stderr
    assert f"Continuing {base} (ModernBertForMaskedLM) with its masked-LM head" in result.stderr
    recorded = json.loads((output_dir / "training_args.json").read_text())["run"]["validation_before_training"]

    documents = validation_documents(base, shards / "validation", load_tokenizer(str(base)).pad_token_id)
    assert (documents["labels"] != -100).sum() == recorded["masked_tokens"]  # as many as its validation scored
    compared = {name: values[:COMPARED_DOCUMENTS] for name, values in documents.items()}
    np.savez(tmp_path / "documents.npz", **documents)
    np.savez(tmp_path / "compared.npz", **compared)
    (found,) = run_check(python, "continued", tmp_path / "documents.npz", base, output_dir, tmp_path / "compared.npz",
                         tmp_path / "pt5.npz")
    assert abs(recorded["loss"] - found["loss_eager"]) < TOLERANCE, (recorded, found)
    assert abs(recorded["loss"] - found["loss_sdpa"]) < TOLERANCE, (recorded, found)

    assert (found["missing"], found["unexpected"]) == ([], [])
    model, _ = load_pretrained(str(output_dir), TFAutoModelForMaskedLM)
    ours = model({"input_ids": compared["input_ids"], "attention_mask": compared["attention_mask"]}).logits.numpy()
    theirs = np.load(tmp_path / "pt5.npz")["logits"]
    real = compared["attention_mask"].astype(bool)
    assert np.abs(ours - theirs)[real].max() < TOLERANCE


def test_packing_rows_no_longer_than_the_special_token_frame_is_one_error_line(in_process, wikitext_tokenizer,
                                                                             wikitext_path, tmp_path):
    """A tokenizer that frames each document with 9 special tokens ([CLS] x 8 ... [SEP]), shards of 8-token rows
    made with it (the sharder takes them: any family may read them), and a ModernBERT asked to pack its documents
    apart in them: no row holds any text, so train and evaluate refuse it, before anything is written."""
    from tokenizers.processors import TemplateProcessing

    from mlm_tpu.tokenizer.load import load_tokenizer

    tokenizer = load_tokenizer(str(wikitext_tokenizer[0]))
    frame = " ".join(["[CLS]"] * 8)
    tokenizer.backend_tokenizer.post_processor = TemplateProcessing(
        single=f"{frame} $A [SEP]", pair=f"{frame} $A [SEP] $B:1 [SEP]:1",
        special_tokens=[(token, tokenizer.convert_tokens_to_ids(token)) for token in ("[CLS]", "[SEP]")])
    tokenizer.save_pretrained(str(tmp_path / "framed"))
    sharded = in_process("shard", "--tokenizer", tmp_path / "framed", "--text-files", wikitext_path, "--limit", 40,
                         "--split", "train", "--max-length", 8, "--output-dir", tmp_path / "shards")
    assert sharded.returncode == 0, sharded.stderr[-2000:]
    result = in_process("train", "--model-config", "modernbert-tiny", "--tokenizer", tmp_path / "framed",
                        "--train-dataset", tmp_path / "shards" / "train", "--max-steps", 1,
                        "--output-dir", tmp_path / "run")
    assert_user_error(result, "modernbert packs documents into rows of 8 tokens", "9 special tokens",
                      "(10 around a pair)", "--max-length above 10")
    assert not (tmp_path / "run").exists()
    model = small_modernbert_folder(tmp_path / "model", tmp_path / "framed")
    scored = in_process("evaluate", "--model", model, "--eval-dataset", tmp_path / "shards" / "train")
    assert_user_error(scored, "modernbert packs documents into rows of 8 tokens")


def test_inspect_shows_the_documents_a_modernbert_keeps_apart(in_process, shards, wikitext_tokenizer):
    """With --model-config modernbert-tiny, each row shown carries the document ids the model's attention and
    positions follow: 1 at the row's first token, one more after each [SEP] (masking never hides one); without it,
    none."""
    from mlm_tpu.tokenizer.load import load_tokenizer

    separator = load_tokenizer(str(wikitext_tokenizer[0])).sep_token_id
    flags = ("--dataset", shards / "validation", "--tokenizer", wikitext_tokenizer[0], "--num-examples", 3, "--json")
    shown = in_process("inspect", *flags, "--model-config", "modernbert-tiny")
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "Packed rows: each document attends only to itself" in shown.stderr
    examples = [json.loads(line) for line in shown.stdout.splitlines()]
    assert len(examples) == 3
    for example in examples:
        ids, documents = example["input_ids"]["ids"], example["document_ids"]["ids"]
        assert len(documents) == len(ids) == MAX_LENGTH
        assert documents == [1 + sum(token == separator for token in ids[:position]) for position in range(len(ids))]
    assert max(max(example["document_ids"]["ids"]) for example in examples) > 1  # rows of several documents
    plain = in_process("inspect", *flags)
    assert plain.returncode == 0 and "document_ids" not in plain.stdout
    assert_user_error(in_process("inspect", *flags, "--model-config", "modernbert-tinyy"),
                      "--model-config 'modernbert-tinyy' is not a preset")  # a typo is no shape without document ids
