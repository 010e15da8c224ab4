"""A ModernBERT folder (transformers 5's layout, as mlm_tpu saves it) in the everyday commands: exported as it is,
read by its Hub name from the Hub cache, and filling masks through a LoRA adapter on it."""

import json

from conftest import assert_user_error
from test_checkpoint_loading import offline_hub  # noqa: F401  (the fixture: a Hub cache made here, offline)
from test_model_families import small_modernbert_folder


def test_a_modernbert_folder_exports_as_it_is_its_weights_checked_and_its_card_refreshed(tmp_path, in_process,
                                                                                         wikitext_tokenizer):
    folder = small_modernbert_folder(tmp_path / "model", wikitext_tokenizer[0])
    result = in_process("export", "--model", folder, "--output-dir", tmp_path / "exported")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "already in transformers 5's layout" in result.stderr
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        assert (tmp_path / "exported" / name).read_bytes() == (folder / name).read_bytes(), name
    assert "ModernBert" in (tmp_path / "exported" / "README.md").read_text()
    cut = small_modernbert_folder(tmp_path / "cut", wikitext_tokenizer[0])
    weights = cut / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-64])
    assert_user_error(in_process("export", "--model", cut, "--output-dir", tmp_path / "not-written"),
                      "model.safetensors")
    assert not (tmp_path / "not-written").exists()


def test_a_modernbert_hub_name_is_read_from_the_hub_cache_as_the_other_families_are(tmp_path, in_process,
                                                                                   wikitext_tokenizer, offline_hub):
    """`--model OWNER/NAME` of a ModernBERT in the Hub cache (offline) fills masks as its folder does (it was read as
    transformers 4's TensorFlow classes read a Hub name, which know no ModernBERT)."""
    folder = small_modernbert_folder(tmp_path / "model", wikitext_tokenizer[0])
    name = offline_hub(folder)
    by_name, by_folder = (in_process("predict", "--model", model, "--json", "the [MASK] of the river")
                          for model in (name, folder))
    assert by_name.returncode == 0, by_name.stderr[-3000:]
    assert json.loads(by_name.stdout)["predictions"] == json.loads(by_folder.stdout)["predictions"]
    assert_user_error(in_process("predict", "--model", "nobody/no-such-modernbert", "the [MASK] of the river"),
                      "nobody/no-such-modernbert")
