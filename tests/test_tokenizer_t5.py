"""`python -m mlm_tpu.tokenizer train --template t5`: T5's special tokens, sentinels and framing, exactly."""

import json

from transformers import AutoTokenizer, T5TokenizerFast

from conftest import CLASSES, assert_user_error, run_module


def test_t5_template_ids_sentinels_and_class(t5_data):
    tokenizer = AutoTokenizer.from_pretrained(t5_data.tokenizer)
    assert isinstance(tokenizer, T5TokenizerFast) and len(tokenizer) == 3000
    assert (tokenizer.pad_token, tokenizer.eos_token, tokenizer.unk_token) == ("<pad>", "</s>", "<unk>")
    assert (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id) == (0, 1, 2)
    sentinels = {f"<extra_id_{i}>": 2999 - i for i in range(100)}  # <extra_id_0> last, as in T5's vocabulary
    assert {token: tokenizer.convert_tokens_to_ids(token) for token in sentinels} == sentinels
    assert tokenizer.additional_special_tokens == list(sentinels)
    assert tokenizer.cls_token is None and tokenizer.mask_token is None
    config = json.loads((t5_data.tokenizer / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "T5TokenizerFast"
    info = json.loads((t5_data.tokenizer / "tokenizer_training.json").read_text())
    assert (info["template"], info["vocab_size"]) == ("t5", 3000)


def test_eos_ends_every_sequence_and_pairs(t5_data):
    tokenizer = AutoTokenizer.from_pretrained(t5_data.tokenizer)
    plain = tokenizer("The game was released in Japan .", add_special_tokens=False)["input_ids"]
    assert tokenizer("The game was released in Japan .")["input_ids"] == plain + [1]
    second = tokenizer("It sold well .", add_special_tokens=False)["input_ids"]
    assert tokenizer("The game was released in Japan .", "It sold well .")["input_ids"] == plain + [1] + second + [1]
    assert 0 not in plain and 2 not in plain  # no pad, no unknown piece in plain English


def test_whitespace_and_newlines_become_one_space_and_text_decodes_back(t5_data):
    tokenizer = AutoTokenizer.from_pretrained(t5_data.tokenizer)
    joined = tokenizer("Title line\nbody  text")["input_ids"]
    assert joined == tokenizer("Title line body text")["input_ids"]
    assert tokenizer.decode(joined, skip_special_tokens=True) == "Title line body text"
    sentinel = tokenizer("the <extra_id_0> sat", add_special_tokens=False)["input_ids"]
    assert sentinel[1] == 2999 and tokenizer.convert_ids_to_tokens(sentinel)[0] == "▁the"


def test_the_test_tasks_labels_are_single_tokens(t5_data):
    tokenizer = AutoTokenizer.from_pretrained(t5_data.tokenizer)
    for label in CLASSES:
        assert len(tokenizer(label, add_special_tokens=False)["input_ids"]) == 1, label


def test_vocabulary_must_leave_room_beyond_the_sentinels(tmp_path):
    result = run_module("mlm_tpu.tokenizer", "train", "--template", "t5", "--builtin-corpus", "pydoc-topics",
                        "--vocab-size", "103", "--output-dir", str(tmp_path / "t5"))
    assert_user_error(result, "--vocab-size 103", "t5 template", "at least 104")
    assert not (tmp_path / "t5").exists()
