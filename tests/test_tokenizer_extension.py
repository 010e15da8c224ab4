"""`tokenizer extend`: new pieces after the base's ids, every old encoding kept where no new piece is (on WikiText, for
WordPiece, byte-level BPE and Unigram), the folder loading in transformers 4.57 and 5 with the same ids, the check
a continued run makes of an extended tokenizer, and the new embedding rows' rule (model_folder/new_embeddings.py)."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import mlm_tpu
from conftest import REPO_ROOT, pytorch_python
from mlm_tpu.errors import UserError
from mlm_tpu.model_folder.new_embeddings import base_cuts, resized
from mlm_tpu.tokenizer.extension import check_extension, segments
from mlm_tpu.tokenizer.load import load_tokenizer
from tokenizer_check import encodings

SAVED_BY_5 = REPO_ROOT / "tests" / "fixtures" / "transformers-5"
NEW_PIECES = 150


@pytest.fixture(scope="module")
def sentences(wikitext_path):
    """WikiText-2 validation cut into sentences: short texts, many of them without any new piece."""
    lines = [line.strip() for line in wikitext_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [sentence for line in lines for sentence in re.split(r"(?<= \.) ", line) if sentence.strip()]


@pytest.fixture(scope="module")
def extended(tmp_path_factory, wikitext_path, wikitext_tokenizer, in_process_module):
    """{family: (base folder, extended folder, what the command printed)}: each base extended by the real command with
    the NEW_PIECES words of WikiText that save the most pieces, padded to a multiple of 64."""
    root = tmp_path_factory.mktemp("extended")
    bases = {"unigram": wikitext_tokenizer[0]}
    for algorithm in ("wordpiece", "bpe"):
        bases[algorithm] = Path(mlm_tpu.train_tokenizer(str(root / algorithm), text_files=[str(wikitext_path)],
                                                        vocab_size=2000, algorithm=algorithm))
    made = {}
    for family, base in bases.items():
        result = in_process_module("tokenizer", "extend", "--tokenizer", base, "--text-files", wikitext_path,
                                   "--num-new-pieces", NEW_PIECES, "--pad-to-multiple-of", 64,
                                   "--output-dir", root / f"{family}-extended")
        assert result.returncode == 0, result.stderr
        made[family] = (base, root / f"{family}-extended", result.stderr + result.stdout)
    return made


@pytest.fixture(scope="module")
def in_process_module():
    """The `in_process` fixture's run, for a module-scoped fixture (no capsys there: the output is captured here)."""
    import contextlib
    import io

    from mlm_tpu.cli import run_command
    from mlm_tpu.cli.main import main

    def run(command, *arguments):
        argv = [command, *map(str, arguments)]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                run_command(main, argv)
                code = 0
            except SystemExit as stop:
                code = stop.code or 0
        return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())

    return run


@pytest.mark.parametrize("family", ["wordpiece", "bpe", "unigram"])
def test_text_without_a_new_piece_encodes_to_the_same_ids_and_the_new_words_stay_whole(family, extended, sentences):
    base_folder, folder, printed = extended[family]
    base, ext = load_tokenizer(str(base_folder)), load_tokenizer(str(folder))
    info = json.loads((folder / "tokenizer_extension.json").read_text(encoding="utf-8"))
    new_ids = set(check_extension(base, ext))
    assert len(ext) % 64 == 0 and new_ids == set(range(len(base), len(ext)))
    assert len(info["new_pieces"]) == NEW_PIECES and len(info["new_pieces"]) + len(info["padding"]) == len(new_ids)
    assert info["pieces_per_word"]["after"] < info["pieces_per_word"]["before"]
    assert re.search(r"Pieces per word on the corpus \(.* words\): [0-9.]+ before, [0-9.]+ after", printed)

    old, new = base(sentences)["input_ids"], ext(sentences)["input_ids"]
    without = [index for index, ids in enumerate(new) if not new_ids & set(ids)]
    assert 200 < len(without) < len(sentences) - 200  # both kinds, in numbers
    assert all(old[index] == new[index] for index in without)
    # the same, said of the text: no word holding a new piece's text (WordPiece: beginning with one)
    pieces = [entry["piece"] for entry in info["new_pieces"]]
    def holds(word):
        return any(word.startswith(piece) if family == "wordpiece" else piece in word for piece in pieces)
    plain = [index for index, sentence in enumerate(sentences) if not any(map(holds, segments(base, sentence)))]
    assert len(plain) > 200 and all(old[index] == new[index] for index in plain)
    # every word added is one id now, and no text reaches a padding piece
    for entry in info["new_pieces"]:
        if entry["kind"] == "word":
            text = (" " if entry["piece"].startswith("Ġ") else "") + entry["text"]  # Ġword: a word after a space
            assert ext(text, add_special_tokens=False)["input_ids"] == [entry["id"]], entry
    padding = {entry["id"] for entry in info["padding"]}
    assert padding and not any(padding & set(ids) for ids in new)


def test_transformers_4_and_5_load_the_extended_folders_with_the_same_ids(extended, sentences, tmp_path):
    python = pytorch_python()
    texts = sentences[:40] + ["Hedgehog in Pennsylvania, 1990.", ["First part.", "Second part."]]
    (tmp_path / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    names = list(extended)
    result = subprocess.run([python, str(Path(__file__).parent / "tokenizer_check.py"), str(tmp_path / "texts.json"),
                             *(str(extended[name][1]) for name in names)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    for name, line in zip(names, result.stdout.strip().splitlines()[-len(names):]):
        theirs, ours = json.loads(line), encodings(str(extended[name][1]), texts)
        for key in ("ids", "token_type_ids", "decoded", "pad_token_id", "mask_token_id"):
            assert theirs[key] == ours[key], (name, key, theirs["transformers"])
        assert max(max(ids) for ids in ours["ids"]) >= len(load_tokenizer(str(extended[name][0])))  # new ids in use


@pytest.mark.parametrize("name", ["bpe", "unigram"])
def test_a_folder_saved_by_transformers_5_takes_the_words_of_a_file_in_its_order(name, in_process, tmp_path):
    words_file = tmp_path / "words.txt"
    words_file.write_text("photosynthesis\nmitochondria\nphotosynthesis\n", encoding="utf-8")
    result = in_process("tokenizer", "extend", "--tokenizer", SAVED_BY_5 / name, "--new-pieces-file", words_file,
                        "--output-dir", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    base, ext = load_tokenizer(str(SAVED_BY_5 / name)), load_tokenizer(str(tmp_path / "out"))
    info = json.loads((tmp_path / "out" / "tokenizer_extension.json").read_text(encoding="utf-8"))
    kept = [entry for entry in info["new_pieces"] if entry["kind"] == "word"]
    assert [entry["text"] for entry in kept] == ["photosynthesis", "mitochondria"]
    assert check_extension(base, ext) == list(range(len(base), len(ext)))
    for entry in kept:
        assert ext(" " + entry["text"], add_special_tokens=False)["input_ids"] == [entry["id"]]
    text = "The statement is simple, and it is the same as before."
    assert ext(text)["input_ids"] == base(text)["input_ids"]


def test_check_extension_refuses_a_moved_piece_and_another_tokenizer(extended, tmp_path):
    base_folder, folder, _ = extended["wordpiece"]
    base = load_tokenizer(str(base_folder))
    moved = tmp_path / "moved"
    shutil.copytree(folder, moved)
    data = json.loads((moved / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = data["model"]["vocab"]
    first, second = [piece for piece, index in vocab.items() if index in (100, 101)]
    vocab[first], vocab[second] = vocab[second], vocab[first]
    (moved / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    (moved / "vocab.txt").unlink()
    with pytest.raises(UserError, match="changes the id of 2 of"):
        check_extension(base, load_tokenizer(str(moved)))
    with pytest.raises(UserError, match="is not an extension of"):
        check_extension(base, load_tokenizer(str(extended["bpe"][1])))


@pytest.mark.parametrize("family", ["wordpiece", "bpe", "unigram"])
def test_each_new_row_is_the_mean_of_the_rows_of_the_pieces_the_base_cuts_its_text_into(family, extended):
    base_folder, folder, _ = extended[family]
    base, ext = load_tokenizer(str(base_folder)), load_tokenizer(str(folder))
    info = json.loads((folder / "tokenizer_extension.json").read_text(encoding="utf-8"))
    random = np.random.default_rng(0)
    embeddings = random.normal(size=(len(base), 16)).astype(np.float32)
    bias = random.normal(size=len(base)).astype(np.float32)
    cuts = base_cuts(base, ext)
    rows, biases = resized(embeddings, bias, cuts, "mean-of-pieces")
    assert rows.shape == (len(ext), 16) and np.array_equal(rows[:len(base)], embeddings)
    spelled = [entry for entry in info["new_pieces"] if "\ufffd" not in entry["text"]]  # not part of a character
    assert len(spelled) > NEW_PIECES * 0.9
    for entry in spelled:
        # the base's own encoding of the piece's text, as a user would cut it (BPE: the word after a space)
        text = (" " if entry["piece"].startswith("Ġ") else "") + entry["text"]
        pieces = base(text, add_special_tokens=False)["input_ids"]
        assert len(pieces) >= 2
        np.testing.assert_allclose(rows[entry["id"]], embeddings[pieces].mean(axis=0), atol=1e-6)
        np.testing.assert_allclose(biases[entry["id"]], bias[pieces].mean(), atol=1e-6)
    for entry in info["padding"]:
        np.testing.assert_allclose(rows[entry["id"]], embeddings.mean(axis=0), atol=1e-6)
        assert biases[entry["id"]] == bias.min()
    means, mean_biases = resized(embeddings, bias, cuts, "mean")
    np.testing.assert_allclose(means[len(base):len(base) + NEW_PIECES], np.tile(embeddings.mean(axis=0),
                                                                                (NEW_PIECES, 1)), atol=1e-6)
    drawn, zeros = resized(embeddings, bias, cuts, "random", initializer_range=0.02, seed=3)
    new = drawn[len(base):]
    assert np.abs(new).max() <= 0.04 and 0.01 < new.std() < 0.02 and not zeros[len(base):].any()
    assert np.array_equal(drawn, resized(embeddings, bias, cuts, "random", initializer_range=0.02, seed=3)[0])


def context_free_logits(model, tokenizer) -> np.ndarray:
    """The model's logits at a mask with no context (the tokenizer's framing of one mask token): its prior."""
    row = tokenizer(tokenizer.mask_token)["input_ids"]
    logits = model(input_ids=np.array([row]), attention_mask=np.ones((1, len(row)), np.int32), training=False).logits
    return np.asarray(logits)[0, row.index(tokenizer.mask_token_id)]


@pytest.mark.parametrize("kind, family", [("bert", "wordpiece"), ("roberta", "bpe")])
def test_mean_of_pieces_gives_each_new_piece_the_prior_of_an_old_piece_as_frequent_on_the_extensions_corpus(
        kind, family, extended):
    """A new word's pieces were chosen for being frequent in the new domain and may be rare in the old one, and a
    masked LM's prior lives in its logits, bias and rows together: round 6's rule (the pieces' mean bias lowered by
    how much rarer the word is than they are, in nats) put the new pieces of a tiny BERT of Wikipedia, whose biases
    span 0.4 nats, at a loss above uniform on IMDB's words (issue 55; the vocabulary extension benchmark). The record
    now holds every base piece's corpus frequency, and at a mask with no context each new piece's logit is the least-squares line of the old pieces' logits against
    log(1 + frequency), at its own frequency; the rows stay their pieces' mean."""
    from mlm_tpu.model_folder.new_embeddings import corpus_frequencies, frequency_line, resized_model

    base_folder, folder, _ = extended[family]
    base, ext = load_tokenizer(str(base_folder)), load_tokenizer(str(folder))
    info = json.loads((folder / "tokenizer_extension.json").read_text(encoding="utf-8"))
    frequencies = corpus_frequencies(ext)
    assert corpus_frequencies(base) is None  # no record: the pieces' mean bias, said in the log
    counts = np.array(frequencies.base)
    assert counts.shape == (len(base),) and (counts > 0).sum() > len(base) / 2
    for entry in info["new_pieces"]:  # the counts each new piece's record gives its pieces (test above: bounded)
        assert entry["base_piece_frequencies"] == counts[base.convert_tokens_to_ids(entry["base_pieces"])].tolist()
    model, cuts = tiny_model(kind, len(base)), base_cuts(base, ext)
    row = ext(ext.mask_token)["input_ids"]
    mask = (row, row.index(ext.mask_token_id))
    grown, _ = resized_model(model, cuts, "mean-of-pieces", frequencies=frequencies, mask=mask)
    logits = context_free_logits(grown, ext)
    intercept, slope = frequency_line(logits[:len(base)], frequencies.base)
    words = [entry for entry in info["new_pieces"]]
    np.testing.assert_allclose(logits[[entry["id"] for entry in words]],
                               intercept + slope * np.log1p([entry["frequency"] for entry in words]), atol=1e-4)
    embeddings = grown.get_input_embeddings().weights[0].numpy()
    for entry in words[:20]:
        np.testing.assert_allclose(embeddings[entry["id"]], embeddings[cuts[entry["id"]]].mean(axis=0), atol=1e-6)
    shifted, _ = resized_model(tiny_model(kind, len(base)), cuts, ("pieces", "pieces-shifted"), frequencies=frequencies)
    old_rule = context_free_logits(shifted, ext)
    line = np.polyval(np.polyfit(np.log1p(counts[counts > 0]), old_rule[:len(base)][counts > 0], 1),
                      np.log1p([entry["frequency"] for entry in words]))
    assert np.abs(old_rule[[entry["id"] for entry in words]] - line).max() > 0.5  # round 6's rule: off the line


def tiny_model(kind: str, vocab_size: int):
    """A tiny transformers TensorFlow model of `kind` with random weights, built."""
    import transformers

    shapes = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
              "vocab_size": vocab_size, "pad_token_id": 1, "max_position_embeddings": 130}
    if kind == "t5":  # T5 1.1: the lm_head is its own kernel [d_model, V], not the shared embeddings
        config = transformers.T5Config(vocab_size=vocab_size, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                                       tie_word_embeddings=False, feed_forward_proj="gated-gelu")
        model = transformers.TFT5ForConditionalGeneration(config)
    else:
        config_class, model_class = {"bert": (transformers.BertConfig, transformers.TFBertForMaskedLM),
                                     "roberta": (transformers.RobertaConfig, transformers.TFRobertaForMaskedLM)}[kind]
        model = model_class(config_class(**shapes))
    model(model.dummy_inputs, training=False)
    return model


@pytest.mark.parametrize("kind, family", [("bert", "wordpiece"), ("roberta", "bpe"), ("t5", "unigram")])
def test_a_grown_model_reads_text_without_a_new_piece_as_before_and_starts_new_rows_at_their_pieces_mean(
        kind, family, extended, sentences, capsys):
    """Hidden states and the logits over the old ids as the base model's (within 1e-5) where no new piece is; the
    loss over the whole, larger vocabulary can only rise, by the new rows' share of the softmax (printed)."""
    import tensorflow as tf

    from mlm_tpu.model_folder.new_embeddings import resized_model

    base_folder, folder, _ = extended[family]
    base, ext = load_tokenizer(str(base_folder)), load_tokenizer(str(folder))
    model = tiny_model(kind, len(base))
    cuts = base_cuts(base, ext)
    grown, changed = resized_model(model, cuts, "mean-of-pieces")
    assert grown.config.vocab_size == len(ext) and len(changed) == 2, changed  # embeddings and bias, or T5's lm_head
    embeddings = [weight.numpy() for weight in grown.weights if tuple(weight.shape) == (len(ext), 32)][0]
    old = [weight.numpy() for weight in model.weights if tuple(weight.shape) == (len(base), 32)][0]
    for index, pieces in list(cuts.items())[:20]:
        np.testing.assert_allclose(embeddings[index], old[pieces].mean(axis=0), atol=1e-6)

    new_ids = set(cuts)
    texts = [text for text in sentences[:300] if not new_ids & set(ext(text)["input_ids"])][:8]
    batch = base(texts, padding="max_length", truncation=True, max_length=48, return_tensors="tf")
    assert batch["input_ids"].numpy().tolist() == ext(texts, padding="max_length", truncation=True, max_length=48,
                                                      return_tensors="tf")["input_ids"].numpy().tolist()
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    if kind == "t5":
        inputs["decoder_input_ids"] = batch["input_ids"]
    before, after = (one(inputs, output_hidden_states=True, training=False) for one in (model, grown))
    hidden = "decoder_hidden_states" if kind == "t5" else "hidden_states"
    np.testing.assert_allclose(getattr(after, hidden)[-1].numpy(), getattr(before, hidden)[-1].numpy(), atol=1e-5)
    np.testing.assert_allclose(after.logits.numpy()[..., :len(base)], before.logits.numpy(), atol=1e-5)
    mask = tf.cast(batch["attention_mask"], tf.float32)
    def loss(logits):
        each = tf.keras.losses.sparse_categorical_crossentropy(batch["input_ids"], logits, from_logits=True)
        return float(tf.reduce_sum(each * mask) / tf.reduce_sum(mask))
    old_loss, new_loss = loss(before.logits), loss(after.logits)
    with capsys.disabled():
        print(f"\n{kind}: loss over the old vocabulary {old_loss:.5f}, over the grown one {new_loss:.5f}")
    assert old_loss <= new_loss < old_loss + 1.0


@pytest.fixture(scope="module")
def extended_shards(extended, wikitext_path, tmp_path_factory):
    """WikiText shards made with the extended Unigram tokenizer: train (200 documents) and validation (50)."""
    from conftest import MAX_LENGTH, run_module

    shards = tmp_path_factory.mktemp("extended-shards")
    for split, limit in (("train", "200"), ("validation", "50")):
        result = run_module("mlm_tpu.shard", "--tokenizer", str(extended["unigram"][1]), "--text-files",
                            str(wikitext_path), "--limit", limit, "--split", split, "--max-length", str(MAX_LENGTH),
                            "--output-dir", str(shards))
        assert result.returncode == 0, result.stderr
    return shards


@pytest.mark.slow
def test_a_checkpoint_continued_with_its_extended_tokenizer_grows_once_resumes_bit_for_bit_and_loads_in_transformers_5(
        extended, trained_mlm, extended_shards, tmp_path):
    """`train --model-name-or-path M --tokenizer EXTENDED` (--new-embeddings: mean-of-pieces, the default): the
    checkpoint's vocabulary grows to the extension's and the log names the count and the rule. Killed after its
    backup of step 4 and started again, the run grows the checkpoint once (the backup is read into the grown model)
    and ends as the uninterrupted run, whose folder transformers 5 loads with TensorFlow's logits (new ids too)."""
    from transformers import TFAutoModelForMaskedLM

    from conftest import run_train
    from mlm_tpu.model_folder.loading import load_model
    from test_continued_families import pytorch_logits_check
    from test_resume import assert_same_run, resumed_at, train_and_kill_after_backup

    folder = extended["unigram"][1]  # the tokenizer trained_mlm was trained with, extended
    ext = load_tokenizer(str(folder))
    def flags(output_dir):
        return ["--train-dataset", extended_shards / "train", "--eval-dataset", extended_shards / "validation",
                "--tokenizer", folder, "--model-name-or-path", trained_mlm[0], "--per-replica-batch-size", 8,
                "--max-steps", 8, "--steps-per-execution", 2, "--backup-steps", 4, "--logging-steps", 1,
                "--output-dir", output_dir]

    uninterrupted = tmp_path / "uninterrupted"
    result = run_train(*flags(uninterrupted))
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(rf"adds {len(ext) - 2000} pieces to .*its vocabulary grows from 2,000 to {len(ext):,} "
                     r".*\(--new-embeddings mean-of-pieces\)", result.stderr), result.stderr[-3000:]
    before = re.search(r"Before training \(the checkpoint as loaded\): loss ([0-9.]+)", result.stderr).group(1)
    print(f"loss before the first step, mean-of-pieces: {before}")
    config = json.loads((uninterrupted / "config.json").read_text())
    assert config["vocab_size"] == len(ext) == len(load_tokenizer(str(uninterrupted)))

    resumed = tmp_path / "resumed"
    train_and_kill_after_backup(flags(resumed), 4, tmp_path / "killed.log")
    finished = run_train(*flags(resumed))
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert resumed_at(finished.stderr) == 4 and finished.stderr.count("its vocabulary grows from 2,000 to") == 1
    assert_same_run(resumed, uninterrupted)

    texts = ["The Hedgehog of Pennsylvania and Kentucky .", "It was brought to London in 1990 ."]
    batch = ext(texts, padding=True, return_tensors="np")
    inputs = {name: batch[name] for name in ("input_ids", "attention_mask")}
    assert (inputs["input_ids"] >= 2000).any()
    logits = load_model(str(uninterrupted), TFAutoModelForMaskedLM)(**inputs, training=False).logits.numpy()
    np.savez(tmp_path / "inputs.npz", **inputs, logits=logits)
    report = pytorch_logits_check(uninterrupted, tmp_path / "inputs.npz")
    assert report["transformers"].startswith("5.") and not report["missing"], report
    assert report["max_abs_diff"] < 1e-4, report

def test_a_checkpoint_with_rows_to_spare_keeps_its_size_and_sets_the_new_ids_rows(extended):
    """A vocabulary padded past its tokenizer (T5's 32,128 for 32,100 pieces): the new ids take spare rows."""
    from mlm_tpu.model_folder.new_embeddings import resized_model

    base_folder, folder, _ = extended["wordpiece"]
    base, ext = load_tokenizer(str(base_folder)), load_tokenizer(str(folder))
    model = tiny_model("bert", len(ext) + 8)
    before = [weight.numpy() for weight in model.weights]
    cuts = base_cuts(base, ext)
    same, changed = resized_model(model, cuts, "mean-of-pieces")
    assert same is model and model.config.vocab_size == len(ext) + 8 and len(changed) == 2, changed
    embeddings = model.get_input_embeddings().weights[0].numpy()
    old = before[[weight.name for weight in model.weights].index(model.get_input_embeddings().weights[0].name)]
    spare = [index for index in range(len(ext) + 8) if index not in cuts]
    assert np.array_equal(embeddings[spare], old[spare])
    for index, pieces in cuts.items():
        expected = old[pieces].mean(axis=0) if pieces else old.mean(axis=0)
        np.testing.assert_allclose(embeddings[index], expected, atol=1e-6)


def test_the_extension_benchmark_gives_every_arm_the_base_tokenizers_words(extended, wikitext_path, tmp_path):
    """benchmarks/vocabulary_extension.py fine-tunes each arm through the downstream benchmark, which cuts a text to
    the words its model's tokenizer keeps in 64 tokens: an extended tokenizer keeps more, so its arms read more of each
    review than `none` (issue 55). Every arm now reads the reviews cut to the base tokenizer's words, which the
    extended tokenizer keeps whole."""
    import sys

    from mlm_tpu.downstream.words import kept_words

    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    try:
        import vocabulary_extension as script
    finally:
        sys.path.remove(str(REPO_ROOT / "benchmarks"))
    base_folder, folder, _ = extended["unigram"]
    base, ext = load_tokenizer(str(base_folder)), load_tokenizer(str(folder))
    texts = [line.strip() for line in wikitext_path.read_text(encoding="utf-8").splitlines()
             if len(line.split()) > 80][:12]
    for split in ("train", "dev"):
        (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps({"text": text, "label": index % 2}) + "\n"
                                                         for index, text in enumerate(texts)), encoding="utf-8")
    task = script.base_words_task(tmp_path, str(base_folder), str(tmp_path / "train.jsonl"),
                                  str(tmp_path / "dev.jsonl"))
    name, _, files = task.partition("=")
    rows = [json.loads(line) for line in Path(files.split(":")[1]).read_text(encoding="utf-8").splitlines()]
    cut = [row["text"] for row in rows]
    assert name == script.DOWNSTREAM_TASK and [row["label"] for row in rows] == [i % 2 for i in range(len(texts))]
    assert cut == kept_words(base, script.MAX_LENGTH, texts)[0] and all(len(text.split()) < 60 for text in cut)
    assert kept_words(ext, script.MAX_LENGTH, cut)[0] == cut  # the extended arms read these words, all of them
    own = kept_words(ext, script.MAX_LENGTH, texts)[0]
    assert sum(map(len, map(str.split, own))) > sum(map(len, map(str.split, cut)))  # what each arm read before
