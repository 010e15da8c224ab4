"""ModernBERT (the hand-written family) grown to an extended tokenizer as every family is (issue 51): through the
registry, which names its vocabulary weights (`model.embeddings.tok_embeddings.weight`, read by the tied decoder, and
`decoder.bias`). Each new row and bias is the mean of its pieces' (1e-6); text without a new piece reads as before
(1e-5); a run continued with the extended tokenizer grows once, resumes bit for bit after a kill, and its folder loads
in transformers 5 as ModernBertForMaskedLM with the same ids and logits (1e-4).

ModernBERT's tokenizer fills its padded vocabulary (50,368 = 787 x 64: 83 `[unusedN]` pieces pad it), so an
extension always grows the model; `tokenizer extend --pad-to-multiple-of 64` keeps the grown size a multiple of 64.
"""

import re
from pathlib import Path

import numpy as np
import pytest

from conftest import MAX_LENGTH, run_module, run_train

NEW_PIECES = 40
TOK_EMBEDDINGS = "model/embeddings/tok_embeddings/embeddings:0"
DECODER_BIAS = "decoder/bias:0"


@pytest.fixture(scope="module")
def extended(wikitext_tokenizer, wikitext_path, tmp_path_factory) -> Path:
    """The session's WikiText tokenizer extended by NEW_PIECES words of WikiText, padded to a multiple of 64."""
    import mlm_tpu

    return Path(mlm_tpu.extend_tokenizer(str(tmp_path_factory.mktemp("modernbert-extended") / "tokenizer"),
                                         tokenizer=str(wikitext_tokenizer[0]), text_files=[str(wikitext_path)],
                                         num_new_pieces=NEW_PIECES, pad_to_multiple_of=64))


def tiny_modernbert(tokenizer, **changes):
    """A one-layer ModernBERT masked LM fitted to `tokenizer`, every weight drawn again (its decoder bias too, which
    starts at 0), so no rule holds by accident."""
    from mlm_tpu.model_folder import families
    from mlm_tpu.modernbert import presets
    from mlm_tpu.modernbert.model import build
    from test_modernbert import perturb

    config = families.MODERNBERT.fitted_config(presets.preset("modernbert-tiny", hidden_size=32, intermediate_size=32,
                                                              num_hidden_layers=1), tokenizer, MAX_LENGTH)
    model = build(config.replace(**changes))
    perturb(model, 0)
    return model


def test_a_grown_modernbert_starts_new_rows_and_biases_at_their_pieces_mean_and_reads_old_text_as_before(
        wikitext_tokenizer, extended, wikitext_path):
    from mlm_tpu.model_folder.new_embeddings import base_cuts, resized_model
    from mlm_tpu.tokenizer.load import load_tokenizer

    base, ext = load_tokenizer(str(wikitext_tokenizer[0])), load_tokenizer(str(extended))
    model = tiny_modernbert(base)
    cuts = base_cuts(base, ext)
    grown, changed = resized_model(model, cuts)
    assert changed == [TOK_EMBEDDINGS, DECODER_BIAS]
    assert grown.config.vocab_size == len(ext) and len(ext) % 64 == 0 and len(ext) > len(base)
    old_rows, old_bias = model.model.embeddings.tok_embeddings.embeddings.numpy(), model.decoder.bias.numpy()
    rows, bias = grown.model.embeddings.tok_embeddings.embeddings.numpy(), grown.decoder.bias.numpy()
    assert grown.decoder.embeddings is grown.model.embeddings.tok_embeddings  # still tied
    assert np.array_equal(rows[:len(base)], old_rows) and np.array_equal(bias[:len(base)], old_bias)
    pieces_of = {index: pieces for index, pieces in cuts.items() if pieces}
    assert len(pieces_of) == NEW_PIECES and all(len(pieces) > 1 for pieces in pieces_of.values())
    for index, pieces in cuts.items():
        if pieces:
            np.testing.assert_allclose(rows[index], old_rows[pieces].mean(axis=0), atol=1e-6)
            np.testing.assert_allclose(bias[index], old_bias[pieces].mean(), atol=1e-6)
        else:  # a padding piece: never read, and as unlikely as the least likely old piece
            np.testing.assert_allclose(rows[index], old_rows.mean(axis=0), atol=1e-6)
            assert bias[index] == old_bias.min()

    lines = [line.strip() for line in wikitext_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = [line for line in lines[:200] if not set(cuts) & set(ext(line)["input_ids"])][:6]
    batch = ext(texts, padding="max_length", truncation=True, max_length=48, return_tensors="np")
    assert len(texts) == 6 and (batch["input_ids"] == base(texts, padding="max_length", truncation=True,
                                                           max_length=48, return_tensors="np")["input_ids"]).all()
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    before, after = (one(inputs, output_hidden_states=True, training=False) for one in (model, grown))
    for old, new in zip(before.hidden_states, after.hidden_states):
        np.testing.assert_allclose(new.numpy(), old.numpy(), atol=1e-5)
    np.testing.assert_allclose(after.logits.numpy()[..., :len(base)], before.logits.numpy(), atol=1e-5)


def test_a_modernbert_with_rows_to_spare_sets_them_in_its_own_vocabulary_weights_only():
    """A vocabulary padded past the new ids keeps its size and sets their rows in the weights the family names: here
    the attention's Wqkv kernel [32, 96] is as wide as the vocabulary (96) and is left alone, as a guess by shape
    would not leave it."""
    from mlm_tpu.model_folder.new_embeddings import resized_model
    from mlm_tpu.modernbert import presets
    from mlm_tpu.modernbert.model import build
    from test_modernbert import perturb

    model = build(presets.preset("modernbert-tiny", vocab_size=96, hidden_size=32, intermediate_size=32,
                                 num_hidden_layers=1))
    perturb(model, 1)
    before = {weight.name: weight.numpy() for weight in model.weights}
    cuts = {90: [5, 6], 91: [7, 8, 9], 92: []}
    same, changed = resized_model(model, cuts, "mean-of-pieces")
    assert same is model and model.config.vocab_size == 96 and changed == [TOK_EMBEDDINGS, DECODER_BIAS]
    for weight in model.weights:
        if weight.name.split("/", 1)[-1] not in changed:
            assert np.array_equal(weight.numpy(), before[weight.name]), weight.name
    rows = model.model.embeddings.tok_embeddings.embeddings.numpy()
    old_rows = before[model.model.embeddings.tok_embeddings.embeddings.name]
    assert np.array_equal(rows[93:], old_rows[93:]) and np.array_equal(rows[:90], old_rows[:90])
    np.testing.assert_allclose(rows[91], old_rows[[7, 8, 9]].mean(axis=0), atol=1e-6)


@pytest.mark.slow
def test_a_modernbert_continued_with_an_extended_tokenizer_grows_once_resumes_bit_for_bit_and_loads_in_transformers_5(
        wikitext_tokenizer, extended, wikitext_path, tmp_path):
    """`train --model-name-or-path MODERNBERT --tokenizer EXTENDED`: the log names the count and the rule. Killed after
    its backup of step 4 and started again, the run grows the checkpoint once (the backup is read into the grown model)
    and ends as the uninterrupted run, whose folder transformers 5 loads (AutoModelForMaskedLM, AutoTokenizer) with
    the same ids, new ones among them, and mlm_tpu's logits."""
    from mlm_tpu.model_folder.new_embeddings import base_cuts
    from mlm_tpu.tokenizer.load import load_tokenizer
    from test_model_families import assert_loads_in_transformers_5, small_modernbert_folder
    from test_resume import assert_same_run, resumed_at, train_and_kill_after_backup

    checkpoint = small_modernbert_folder(tmp_path / "checkpoint", wikitext_tokenizer[0])
    shards = tmp_path / "shards"
    result = run_module("mlm_tpu.shard", "--tokenizer", str(extended), "--text-files", str(wikitext_path), "--limit",
                        "200", "--max-length", str(MAX_LENGTH), "--output-dir", str(shards))
    assert result.returncode == 0, result.stderr
    base, ext = load_tokenizer(str(wikitext_tokenizer[0])), load_tokenizer(str(extended))
    old_size = len(base)

    def flags(output_dir):
        return ["--train-dataset", shards / "train", "--tokenizer", extended, "--model-name-or-path", checkpoint,
                "--per-replica-batch-size", 8, "--max-steps", 8, "--steps-per-execution", 2, "--backup-steps", 4,
                "--logging-steps", 1, "--output-dir", output_dir]

    uninterrupted = tmp_path / "uninterrupted"
    result = run_train(*flags(uninterrupted))
    assert result.returncode == 0, result.stderr[-3000:]
    grows = f"its vocabulary grows from {old_size:,} to {len(ext):,}"
    assert re.search(rf"adds {len(ext) - old_size} pieces .*{grows} .*\(--new-embeddings mean-of-pieces\)",
                     result.stderr), result.stderr[-3000:]

    resumed = tmp_path / "resumed"
    train_and_kill_after_backup(flags(resumed), 4, tmp_path / "killed.log")
    finished = run_train(*flags(resumed))
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert resumed_at(finished.stderr) == 4 and finished.stderr.count(grows) == 1
    assert_same_run(resumed, uninterrupted)

    new_ids = {index for index, pieces in base_cuts(base, ext).items() if pieces}  # not the padding
    lines = [line.strip() for line in wikitext_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = [line[:200] for line in lines if new_ids & set(ext(line[:200])["input_ids"])][:2] + ["the end"]
    found = assert_loads_in_transformers_5(uninterrupted, tmp_path, texts)
    ours = ext(texts, padding=True, return_tensors="np")
    assert np.array_equal(found["input_ids"], ours["input_ids"]) and (found["input_ids"] >= old_size).any()


def test_an_untied_modernbert_decoder_grows_its_own_weight_by_the_rule():
    """tie_word_embeddings false: `decoder.weight` is a weight of its own, and its new rows start as the embeddings'."""
    from mlm_tpu.model_folder.new_embeddings import resized_model
    from mlm_tpu.modernbert import presets
    from mlm_tpu.modernbert.model import build
    from test_modernbert import perturb

    model = build(presets.preset("modernbert-tiny", vocab_size=64, hidden_size=32, intermediate_size=32,
                                 num_hidden_layers=1, tie_word_embeddings=False))
    perturb(model, 2)
    cuts = {64: [5, 6], 65: [7, 8, 9]}
    grown, changed = resized_model(model, cuts, "mean-of-pieces")
    assert changed == [TOK_EMBEDDINGS, "decoder/weight:0", DECODER_BIAS] and grown.config.vocab_size == 66
    old, new = model.decoder.kernel.numpy(), grown.decoder.kernel.numpy()
    assert np.array_equal(new[:64], old)
    for index, pieces in cuts.items():
        np.testing.assert_allclose(new[index], old[pieces].mean(axis=0), atol=1e-6)
