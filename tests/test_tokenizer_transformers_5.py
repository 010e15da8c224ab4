"""Tokenizer folders saved by transformers 5 (tests/fixtures/transformers-5, and one the side venv saves): every
command loads them, through mlm_tpu.tokenizer.load, with the ids, special tokens and fingerprint of the folder they
were saved from."""

import json
import shutil
import subprocess

import pytest

from conftest import REPO_ROOT, pytorch_python, run_module
from mlm_tpu.errors import UserError
from mlm_tpu.shards.reading import ShardSet, check_tokenizer
from mlm_tpu.tokenizer.load import load_tokenizer, tokenizer_fingerprint

FIXTURES = REPO_ROOT / "tests" / "fixtures"
SAVED_BY_5 = FIXTURES / "transformers-5"
SOURCES = {"unigram": FIXTURES / "unigram-0.4" / "mlm", "t5": FIXTURES / "unigram-0.4" / "t5",
           "bpe": SAVED_BY_5 / "bpe-source"}  # the folder transformers 5 loaded and saved as SAVED_BY_5 / name
TEXTS = [["The statement is simple.", None], ["First part.", "Second part, [MASK] <mask> <extra_id_0> end."]]
ROLES = ("cls_token", "sep_token", "pad_token", "mask_token", "unk_token", "bos_token", "eos_token",
         "additional_special_tokens", "model_max_length", "model_input_names")


def described(tokenizer) -> dict:
    """What a command reads of a tokenizer: its class, size, special-token roles and how it frames texts."""
    return {"class": type(tokenizer).__name__, "size": len(tokenizer),
            "roles": {role: getattr(tokenizer, role) for role in ROLES},
            "encoded": [dict(tokenizer(*text)) for text in TEXTS]}


@pytest.mark.parametrize("name, class_name", [("unigram", "TokenizersBackend"), ("bpe", "RobertaTokenizer"),
                                              ("t5", "T5Tokenizer")])
def test_a_folder_saved_by_transformers_5_loads_as_the_folder_it_was_saved_from(name, class_name):
    """TokenizersBackend is a class transformers 4.57 does not know, and T5's sentinels are a list under
    `extra_special_tokens`, which 4.57 takes for a dict; there is no special_tokens_map.json."""
    config = json.loads((SAVED_BY_5 / name / "tokenizer_config.json").read_text())
    assert (config["tokenizer_class"], config["backend"]) == (class_name, "tokenizers")
    assert not (SAVED_BY_5 / name / "special_tokens_map.json").exists()
    assert described(load_tokenizer(str(SAVED_BY_5 / name))) == described(load_tokenizer(str(SOURCES[name])))


@pytest.mark.parametrize("name, same", [("unigram", True), ("bpe", True), ("t5", False)])
def test_a_folder_saved_by_transformers_5_has_the_fingerprint_of_the_one_it_was_saved_from(name, same):
    """transformers 5 writes a RoBERTa BPE's absent subword prefix and suffix as "" (its tokenizer.json differs, the
    tokenizer does not); it rebuilds a T5Tokenizer's pipeline without the normalizer the folder had (`` and '' no
    longer become "): another tokenizer, another fingerprint."""
    saved, source = (load_tokenizer(str(folder)) for folder in (SAVED_BY_5 / name, SOURCES[name]))
    assert ((SAVED_BY_5 / name / "tokenizer.json").read_bytes() == (SOURCES[name] / "tokenizer.json").read_bytes()) \
        == (name == "unigram")
    assert (tokenizer_fingerprint(saved) == tokenizer_fingerprint(source)) == same


def test_shards_that_recorded_the_fingerprint_of_the_file_as_saved_still_read():
    """Manifests written before the fingerprint read a transformers 5 BPE as transformers 4 writes it."""
    tokenizer = load_tokenizer(str(SAVED_BY_5 / "bpe"))
    def shards(recorded):
        return ShardSet(["shards/x-00000-1.tfrecord"], [1], {}, {"settings": {"tokenizer_fingerprint": recorded}})

    for recorded in (tokenizer_fingerprint(tokenizer), tokenizer_fingerprint(tokenizer, as_saved=True)):
        check_tokenizer(shards(recorded), tokenizer, "--dataset", "--tokenizer")
    other = load_tokenizer(str(SOURCES["unigram"]))
    with pytest.raises(UserError, match="another tokenizer"):
        check_tokenizer(shards(tokenizer_fingerprint(other)), tokenizer, "--dataset", "--tokenizer")


def test_shard_makes_the_same_shards_from_a_transformers_5_folder(tmp_path):
    for name, folder in (("source", SOURCES["unigram"]), ("saved", SAVED_BY_5 / "unigram")):
        result = run_module("mlm_tpu.shard", "--tokenizer", str(folder), "--builtin-corpus", "pydoc-topics",
                            "--limit", "40", "--max-length", "32", "--split", "validation",
                            "--output-dir", str(tmp_path / name))
        assert result.returncode == 0, result.stderr
    records = {name: {path.name: path.read_bytes() for path in (tmp_path / name / "validation").glob("*.tfrecord")}
               for name in ("source", "saved")}
    assert records["saved"] and records["saved"] == records["source"]
    manifests = [json.loads((tmp_path / name / "validation" / "manifest.json").read_text()) for name in records]
    assert manifests[0]["settings"]["tokenizer_fingerprint"] == manifests[1]["settings"]["tokenizer_fingerprint"]


@pytest.mark.parametrize("name", ["unigram", "t5"])
def test_tokenizer_encode_shows_a_transformers_5_folder_as_its_source(name):
    shown = [run_module("mlm_tpu.tokenizer", "encode", "--tokenizer", str(folder), "--json", "A <extra_id_0> [MASK]")
             for folder in (SAVED_BY_5 / name, SOURCES[name])]
    assert shown[0].returncode == 0, shown[0].stderr
    assert shown[0].stdout == shown[1].stdout and "Traceback" not in shown[0].stderr


SAVE_WITH_TRANSFORMERS_5 = """import sys, transformers
assert int(transformers.__version__.split(".")[0]) >= 5, transformers.__version__
transformers.AutoTokenizer.from_pretrained(sys.argv[1]).save_pretrained(sys.argv[1])"""


@pytest.mark.slow  # two fill-mask runs of a model
def test_predict_fills_masks_with_a_model_whose_tokenizer_transformers_5_saved(tmp_path):
    """The tiny RoBERTa of tests/fixtures/made-by-0.2, its tokenizer loaded and saved again by transformers 5."""
    python = pytorch_python()
    model = shutil.copytree(FIXTURES / "made-by-0.2" / "roberta", tmp_path / "roberta")
    (model / "special_tokens_map.json").unlink()  # transformers 5 writes none
    saved = subprocess.run([python, "-c", SAVE_WITH_TRANSFORMERS_5, str(model)], capture_output=True, text=True,
                           timeout=300)
    assert saved.returncode == 0, saved.stderr[-3000:]
    assert json.loads((model / "tokenizer_config.json").read_text())["tokenizer_class"] == "TokenizersBackend"
    filled = [run_module("mlm_tpu.predict", "--model", str(folder), "--json", "The [MASK] statement.")
              for folder in (model, FIXTURES / "made-by-0.2" / "roberta")]
    assert filled[0].returncode == 0, filled[0].stderr
    assert json.loads(filled[0].stdout) == json.loads(filled[1].stdout)
