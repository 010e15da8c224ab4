"""`tokenizer train --algorithm unigram|bpe|wordpiece`: each family's special tokens, framing and class, text that
never becomes <unk>, determinism, word starts, transformers 5 loading the folders with the same ids, and every
command downstream (shard, train, inspect, fill-mask, export) working with each."""

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from transformers import AutoTokenizer

import mlm_tpu
from conftest import REPO_ROOT, assert_user_error, pytorch_python, run_module
from mlm_tpu.errors import UserError
from mlm_tpu.tokenizer.word_starts import word_start_flags, word_start_table, word_starts
from tokenizer_check import encodings

FIXTURES = REPO_ROOT / "tests" / "fixtures"
# Emoji, code and CJK: what a vocabulary learned from English Wikipedia has never seen.
PROBE = ["Emoji 😀🎉👍🏽 and ❤️", "def f(x):\n    return {'k': x ** 2}  # ~`|\\^", "中文和日本語のテキスト、한국어도.",
         "naïve café Ωmega ﬁ ²"]
FAMILIES = {  # name -> the settings it is trained with (all on WikiText-2 validation, 2,000 ids)
    "bpe": {"algorithm": "bpe"},
    "wordpiece": {"algorithm": "wordpiece"},
    "unigram": {"limit": 400},
    "unigram-bytes": {"byte_fallback": True, "limit": 400},
    # the options where transformers 5's class would drop a normalization: saved as PreTrainedTokenizerFast
    "bpe-lowercase-nfkc": {"algorithm": "bpe", "lowercase": True, "normalization": "nfkc", "limit": 400},
    "wordpiece-lowercase": {"algorithm": "wordpiece", "lowercase": True, "limit": 400},
    "wordpiece-nfkc": {"algorithm": "wordpiece", "normalization": "nfkc", "limit": 400},
}


def train(folder: Path, corpus: Path, **settings) -> Path:
    mlm_tpu.train_tokenizer(str(folder), text_files=[str(corpus)], vocab_size=2000, **settings)
    return folder


@pytest.fixture(scope="module")
def families(tmp_path_factory, wikitext_path):
    """Every family's tokenizer (and some options), trained in this process as the command trains them."""
    root = tmp_path_factory.mktemp("families")
    return {name: train(root / name, wikitext_path, **settings) for name, settings in FAMILIES.items()}


@pytest.mark.parametrize("template", ["mlm", "t5"])
def test_the_default_unigram_tokenizer_is_byte_identical_to_mlm_tpu_0_4s(template, tmp_path):
    """Files saved by the code before --algorithm existed (tests/fixtures/unigram-0.4) for the same corpus and flags."""
    folder = tmp_path / f"golden-{template}"
    mlm_tpu.train_tokenizer(str(folder), builtin_corpus="pydoc-topics", limit=200, vocab_size=300, template=template)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "README.md"):
        assert (folder / name).read_bytes() == (FIXTURES / "unigram-0.4" / template / name).read_bytes(), name


@pytest.mark.parametrize("name, class_name, tokens, pair", [
    ("bpe", "RobertaTokenizerFast", ["<s>", "<pad>", "</s>", "<unk>", "<mask>"], "<s> A </s> </s> B </s>"),
    ("wordpiece", "BertTokenizerFast", ["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"], "[CLS] A [SEP] B [SEP]"),
    ("unigram-bytes", "PreTrainedTokenizerFast", ["[CLS]", "<pad>", "[SEP]", "<unk>", "[MASK]"], "[CLS] A [SEP] B [SEP]"),
    ("bpe-lowercase-nfkc", "PreTrainedTokenizerFast", ["<s>", "<pad>", "</s>", "<unk>", "<mask>"], "<s> A </s> </s> B </s>"),
])
def test_each_family_has_its_special_tokens_framing_and_class_with_the_pad_at_id_1(name, class_name, tokens, pair,
                                                                                   families):
    folder = families[name]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert type(tokenizer).__name__ == class_name and len(tokenizer) == 2000
    assert tokenizer.convert_ids_to_tokens(list(range(5))) == tokens
    assert (tokenizer.cls_token, tokenizer.pad_token, tokenizer.sep_token, tokenizer.unk_token,
            tokenizer.mask_token) == tuple(tokens)
    assert (tokenizer.pad_token_id, tokenizer.mask_token_id) == (1, 4)  # RoBERTa's padding index, whatever the family
    first, second = (tokenizer(text, add_special_tokens=False)["input_ids"] for text in ("The game", "It sold"))
    encoded = tokenizer("The game", "It sold")
    frame = {"A": first, "B": second, "<s>": [0], "[CLS]": [0], "</s>": [2], "[SEP]": [2]}
    assert encoded["input_ids"] == [i for part in pair.split() for i in frame[part]]
    if name == "wordpiece":  # BERT's token types
        assert encoded["token_type_ids"] == [0] * (len(first) + 2) + [1] * (len(second) + 1)
    else:
        assert "token_type_ids" not in encoded
    info = json.loads((folder / "tokenizer_training.json").read_text())
    assert info["algorithm"] == FAMILIES[name].get("algorithm", "unigram")
    assert (info["lowercase"], info["normalization"]) == (FAMILIES[name].get("lowercase", False),
                                                          FAMILIES[name].get("normalization", "none"))


def test_byte_level_bpe_trained_on_wikitext_never_gives_unk_on_emoji_code_and_cjk(families):
    """Nor does Unigram with byte fallback; both decode the text back as written. WordPiece, as BERT's, has no
    bytes to fall back on."""
    for name in ("bpe", "unigram-bytes"):
        tokenizer = AutoTokenizer.from_pretrained(families[name])
        for text in PROBE:
            ids = tokenizer(text)["input_ids"]
            assert tokenizer.unk_token_id not in ids, (name, text, tokenizer.convert_ids_to_tokens(ids))
            assert tokenizer.decode(ids, skip_special_tokens=True) == text
    bert = AutoTokenizer.from_pretrained(families["wordpiece"])
    assert bert.unk_token_id in bert(PROBE[0])["input_ids"]


def test_byte_pieces_follow_the_special_tokens_and_never_cut_text_that_spells_one(families):
    tokenizer = AutoTokenizer.from_pretrained(families["unigram-bytes"])
    assert tokenizer.convert_ids_to_tokens([5, 6, 260]) == ["<0x00>", "<0x01>", "<0xFF>"]
    emoji = tokenizer("😀", add_special_tokens=False)["input_ids"]
    assert tokenizer.convert_ids_to_tokens(emoji) == ["▁", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]
    literal = "a literal <0x41> and <0xF0>"
    ids = tokenizer(literal)["input_ids"]
    assert not set(ids) & set(range(5, 261)) and tokenizer.decode(ids, skip_special_tokens=True) == literal


@pytest.mark.parametrize("name", ["bpe", "wordpiece", "unigram-bytes"])
def test_the_same_corpus_and_flags_give_a_byte_identical_tokenizer_json(name, families, wikitext_path, tmp_path):
    """WordPiece's trainer numbers its continuation characters in hash-map order, which changed the vocabulary
    from run to run (wordpiece.py). (Unigram's own: test_tokenizer_train.py.)"""
    again = train(tmp_path / "again", wikitext_path, **FAMILIES[name])
    assert (again / "tokenizer.json").read_bytes() == (families[name] / "tokenizer.json").read_bytes()


def test_wordpiece_reads_a_sample_twice_the_same_way(wikitext_path, tmp_path):
    """The sample is drawn once and trained on twice (wordpiece.py), and the same seed gives the same tokenizer."""
    settings = {"algorithm": "wordpiece", "sample_documents": 500, "seed": 3}
    samples = [train(tmp_path / f"sample-{run}", wikitext_path, **settings) for run in range(2)]
    assert (samples[0] / "tokenizer.json").read_bytes() == (samples[1] / "tokenizer.json").read_bytes()
    assert json.loads((samples[0] / "tokenizer_training.json").read_text())["documents"] == 500


def test_a_wordpiece_vocabulary_its_alphabet_fills_is_refused_naming_the_smallest_that_works(tmp_path):
    """WordPiece keeps every character of the corpus and ##c for each inside a word, whatever --vocab-size says (the
    trainer gave 194 ids for 60): as BPE's 256 bytes, they leave no room in a smaller vocabulary, refused before
    anything is saved. Here: the 5 special tokens, t h e c a s, and ##h ##e ##a ##t take 15 ids."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat\nthe hat\n", encoding="utf-8")

    def train_wordpiece(vocab_size: int, output):
        return run_module("mlm_tpu.tokenizer", "train", "--algorithm", "wordpiece", "--text-files", str(corpus),
                          "--vocab-size", str(vocab_size), "--output-dir", str(output))

    for vocab_size in (10, 15):
        refused = train_wordpiece(vocab_size, tmp_path / f"wp-{vocab_size}")
        assert_user_error(refused, f"--vocab-size {vocab_size} is too small", "6 characters and 4 ## continuations",
                          "take 15 ids", "use at least 16")
        assert not (tmp_path / f"wp-{vocab_size}").exists() and refused.stdout == ""
    trained = train_wordpiece(16, tmp_path / "wp-16")
    assert trained.returncode == 0, trained.stderr
    assert json.loads((tmp_path / "wp-16" / "tokenizer_training.json").read_text())["vocab_size"] == 16


def test_word_starts_are_read_from_the_tokenizer_of_any_family(families):
    expected = {"bpe": ("bpe", "Ġ", True), "wordpiece": ("wordpiece", "##", False), "unigram": ("unigram", "▁", True),
                "unigram-bytes": ("unigram", "▁", True)}
    for name, (family, marker, marks_start) in expected.items():
        starts = word_starts(AutoTokenizer.from_pretrained(families[name]))
        assert (starts.family, starts.marker, starts.marks_start) == (family, marker, marks_start)
    for old in ("tokenizer", "t5-tokenizer"):  # mlm_tpu 0.2's, and T5's layout
        assert word_starts(AutoTokenizer.from_pretrained(FIXTURES / "made-by-0.2" / old)).marker == "▁"
    for name in ("bpe", "wordpiece", "unigram-bytes"):
        tokenizer = AutoTokenizer.from_pretrained(families[name])
        table = word_start_table(tokenizer)
        assert all(table[i] for i in tokenizer.all_special_ids)
        ids = tokenizer("The unbelievably tall tower 😀 stood.")["input_ids"]
        words = []
        for token, starts_word in zip(tokenizer.convert_ids_to_tokens(ids),
                                      word_start_flags(ids, table, set(tokenizer.all_special_ids))):
            words.append([token]) if starts_word else words[-1].append(token)
        text = [tokenizer.convert_tokens_to_string(word).strip() for word in words]
        assert text[0] == tokenizer.cls_token and text[-1] == tokenizer.sep_token  # special tokens stand alone
        assert text[1:5] == ["The", "unbelievably", "tall", "tower"], (name, words)


def test_a_tokenizer_without_word_marks_is_one_clear_error():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    with pytest.raises(UserError, match="cannot tell how the tokenizer .* marks word starts"):
        word_starts(PreTrainedTokenizerFast(tokenizer_object=backend))


def test_transformers_5_loads_every_family_with_the_same_class_and_ids(families, tmp_path):
    python = pytorch_python()
    texts = PROBE + ["Paris is the <mask> of France.", ["First part.", "Second part."], "  ÉCOLE\tTab\nnew line"]
    (tmp_path / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    names = list(families)
    result = subprocess.run([python, str(Path(__file__).parent / "tokenizer_check.py"), str(tmp_path / "texts.json"),
                             *(str(families[name]) for name in names)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    for name, line in zip(names, result.stdout.strip().splitlines()[-len(names):]):
        theirs, ours = json.loads(line), encodings(str(families[name]), texts)
        assert theirs["class"].removesuffix("Fast") in (ours["class"].removesuffix("Fast"), "TokenizersBackend"), name
        for key in ("ids", "token_type_ids", "decoded", "pad_token_id", "mask_token_id"):
            assert theirs[key] == ours[key], (name, key, theirs["transformers"])


def test_encode_shows_each_familys_pieces_and_word_marker(families, capsys):
    from mlm_tpu.cli.tokenizer import main

    main(["encode", "--tokenizer", str(families["bpe"]), "1990 – 1995, the year 😀"])
    shown = capsys.readouterr().out
    assert shown.startswith("family:  bpe; a piece starting with Ġ starts a word")
    tokens = shown.split("tokens:  ")[1].splitlines()[0].split()
    # an en dash, one piece in WikiText's vocabulary, as itself (stored as "ĠâĢĵ"); the emoji's bytes, apart, as bytes
    assert "Ġ–" in tokens and "Ġthe" in tokens and tokens[-5:] == ["<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "</s>"]
    main(["encode", "--tokenizer", str(families["wordpiece"]), "--json", "unbelievable"])
    row = json.loads(capsys.readouterr().out)
    assert row["pieces"] == row["tokens"] and any(token.startswith("##") for token in row["tokens"])


def test_a_wordpiece_tokenizer_gives_a_roberta_config_its_pad_and_both_token_types(families, capsys):
    from mlm_tpu.mlm.presets import config_for

    config = config_for("tiny", AutoTokenizer.from_pretrained(families["wordpiece"]), 32)
    assert (config.pad_token_id, config.bos_token_id, config.eos_token_id, config.type_vocab_size) == (1, 0, 2, 2)
    assert config_for("tiny", AutoTokenizer.from_pretrained(families["bpe"]), 32).type_vocab_size == 1
    assert "warning" not in capsys.readouterr().err


@pytest.fixture(scope="module")
def trained(families, wikitext_path, tmp_path_factory):
    """trained(name): a tiny RoBERTa trained 2 steps on shards made with the family's tokenizer (made once);
    (model folder, shards folder)."""
    made = {}

    def train_once(name: str):
        if name not in made:
            root = tmp_path_factory.mktemp(f"trained-{name}")
            mlm_tpu.shard_corpus(str(families[name]), str(root / "shards"), text_files=[str(wikitext_path)],
                                 limit=150, split="train", max_length=32)
            result = mlm_tpu.train_model(str(root / "shards" / "train"), str(root / "model"),
                                         tokenizer=str(families[name]), model_config="tiny", max_steps=2,
                                         per_replica_batch_size=8, learning_rate=3e-3)
            assert result.steps == 2 and np.isfinite(result.epochs[-1]["loss"])
            made[name] = root / "model", root / "shards" / "train"
        return made[name]
    return train_once


@pytest.mark.slow  # trains two tiny models
@pytest.mark.parametrize("name", ["bpe", "wordpiece"])
def test_shard_train_inspect_and_fill_mask_work_with_the_family(name, families, trained):
    """The model folder keeps the family's tokenizer class and fills masks written either way."""
    from mlm_tpu.tasks import plug_in_of_split, shard_kinds
    from mlm_tpu.training.inspection import InspectionConfig, examples_as_fed

    model, shards = trained(name)
    tokenizer = AutoTokenizer.from_pretrained(families[name])
    assert type(AutoTokenizer.from_pretrained(model)) is type(tokenizer)
    sentences = ["Paris is the [MASK] of France.", "Paris is the <mask> of France."]
    for (candidates,) in mlm_tpu.fill_mask(str(model), sentences, top_k=3):
        assert len(candidates) == 3 and all(c["sequence"].startswith("Paris is the") for c in candidates)
    if name == "bpe":  # <mask>, not [MASK]
        shown = examples_as_fed(InspectionConfig(str(shards), str(families[name]), 1), shard_kinds(),
                                plug_in_of_split)[0]
        assert tokenizer.mask_token in shown["input_ids"]["text"] and shown["labels"]["ids"]


@pytest.mark.slow
def test_a_model_of_a_wordpiece_tokenizer_exports_and_pytorch_gives_the_same_logits_for_a_pair(families, trained,
                                                                                                tmp_path):
    """`export` of the TensorFlow weights alone; transformers' PyTorch RoBERTa loads the result, and both of BERT's
    token types give TensorFlow's logits."""
    import transformers

    model, _ = trained("wordpiece")
    tf_only = tmp_path / "tf-only"
    shutil.copytree(model, tf_only, ignore=shutil.ignore_patterns("model.safetensors", "backup", "logs"))
    exported = Path(mlm_tpu.export_model(str(tf_only), output_dir=str(tmp_path / "exported")))
    assert (exported / "model.safetensors").is_file()
    assert type(AutoTokenizer.from_pretrained(exported)).__name__ == "BertTokenizerFast"
    python = pytorch_python()
    inputs = dict(AutoTokenizer.from_pretrained(exported)("The game was released .", "In Japan .", return_tensors="np"))
    assert set(inputs["token_type_ids"][0]) == {0, 1}
    tf_model = transformers.TFAutoModelForMaskedLM.from_pretrained(exported, use_safetensors=False)
    np.savez(tmp_path / "inputs.npz", logits=tf_model(**inputs).logits.numpy(), **inputs)
    result = subprocess.run([python, str(Path(__file__).parent / "pytorch_check.py"), str(exported),
                             "RobertaForMaskedLM", str(tmp_path / "inputs.npz")], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["missing"] == [] and found["unexpected"] == [] and found["max_abs_diff"] < 1e-4, found
