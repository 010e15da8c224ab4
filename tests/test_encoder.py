"""The encoder line, end to end on tiny models: labelled shards, fine-tuning (sequence classification of one text,
of pairs, regression; token classification), validation scores against scikit-learn, SciPy and seqeval on the
same predictions, evaluate, predict, the saved folder in transformers 5 + PyTorch, and the model card.

One module-scoped run per task, each on another family of encoder: a RoBERTa masked LM (as mlm_tpu pretrains one)
for single texts, a BERT for pairs (token types fed), RoBERTa from scratch for the regression, an ELECTRA
discriminator for tags. The bases are random tiny models saved here: no Hub.
"""

import json
import logging
import random
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import WORDS, assert_user_error, run_module, write_jsonl

MAX_LENGTH = 32
TAGS = ("O", "B-PER", "B-LOC", "I-LOC")  # the token task's tags, as ids in its rows (🤗 ClassLabel style)
LABELS = ("low", "good", "high")  # the classes of the single texts; their scores in the regression:
SCORES = {"low": 0.5, "good": 2.5, "high": 4.5}


def whole_words(tokenizer_dir) -> list:
    """WORDS the tokenizer keeps whole, one piece each (a tag goes on a word's first piece: "▁" alone would say
    nothing of the word, and a tiny model would take long to learn it from the next piece)."""
    from transformers import AutoTokenizer

    pieces = AutoTokenizer.from_pretrained(tokenizer_dir)
    return [word for word in WORDS if len(pieces(word, add_special_tokens=False)["input_ids"]) == 1]


def sentence(rng, filler, key=None):
    words = rng.choices(filler, k=rng.randint(3, 10))
    if key:
        words.insert(rng.randint(0, len(words)), key)
    return " ".join(words)


def rows_of(kind: str, count: int, seed: int, whole: list):
    """`count` rows of the synthetic task `kind`, made of WORDS; the words that give the answer away are of `whole`
    (one piece each, and no filler): the first 4 are people (B-PER), the next 4 and 4 begin and end places (B-LOC
    I-LOC), the last 3 say the class (low, good, high) or the score (0.5, 2.5, 4.5, give or take 0.3)."""
    rng = random.Random(seed)
    people, starts, ends, keys = whole[:4], whole[4:8], whole[8:12], dict(zip(LABELS, whole[-3:]))
    filler = [word for word in WORDS if word not in whole[:12] + whole[-3:]]
    rows = []
    for _ in range(count):
        label = rng.choice(LABELS)
        if kind == "single":
            rows.append({"text": sentence(rng, filler, keys[label]), "label": label})
        elif kind == "pair":  # the second text says it
            label = rng.choice(["no", "yes"])
            rows.append({"question": sentence(rng, filler), "answer": sentence(
                rng, filler, keys["high" if label == "yes" else "low"]), "label": label})
        elif kind == "regression":
            rows.append({"text": sentence(rng, filler, keys[label]),
                         "score": round(SCORES[label] + rng.uniform(-0.3, 0.3), 2)})
        else:
            words = sentence(rng, filler).split()
            tags = [0] * len(words)
            for _ in range(rng.randint(1, 2)):
                at = rng.randint(0, len(words))
                if rng.random() < 0.5:
                    words[at:at] = [rng.choice(people)]
                    tags[at:at] = [1]
                else:
                    words[at:at] = [rng.choice(starts), rng.choice(ends)]
                    tags[at:at] = [2, 3]
            rows.append({"tokens": words, "ner_tags": tags})
    return rows


TASKS = {  # run -> its shards' settings (mlm_tpu.shard_corpus's, as the shard command's flags)
    "single": dict(task="sequence-classification", input_columns=("text",), target_column="label"),
    "pair": dict(task="sequence-classification", input_columns=("question",), pair_column="answer",
                 target_column="label"),
    "regression": dict(task="sequence-classification", input_columns=("text",), target_column="score"),
    "tags": dict(task="token-classification", input_columns=("tokens",), target_column="ner_tags", labels=TAGS),
}


def shard(tokenizer, folder: Path, run: str) -> Path:
    from mlm_tpu.api import shard_corpus

    whole = whole_words(tokenizer)
    for split, count, seed in (("train", 240, 1), ("validation", 60, 2)):
        path = write_jsonl(folder / f"{run}-{split}.jsonl", rows_of(run, count, seed, whole))
        shard_corpus(str(tokenizer), str(folder / run), text_files=(str(path),), split=split, max_length=MAX_LENGTH,
                     **TASKS[run])
    return folder / run


def save_base(folder: Path, family: str, tokenizer_dir: Path) -> Path:
    """A tiny random encoder of `family` saved as a pretrained base (its tokenizer beside it)."""
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras)
    import tf_keras as keras
    import transformers
    from transformers import AutoTokenizer

    from mlm_tpu.model_folder.card import CardFacts, CardWords
    from mlm_tpu.model_folder.saving import save_model_folder

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    shape = dict(vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=128, max_position_embeddings=MAX_LENGTH + 2, pad_token_id=tokenizer.pad_token_id)
    if family == "roberta":
        from mlm_tpu.mlm.presets import config_for

        config, class_name = config_for("tiny", tokenizer, MAX_LENGTH), "TFRobertaForMaskedLM"
    elif family == "bert":
        config, class_name = transformers.BertConfig(**shape), "TFBertForMaskedLM"
        tokenizer.model_input_names = ["input_ids", "token_type_ids", "attention_mask"]  # as BERT's tokenizer
    else:
        config, class_name = transformers.ElectraConfig(embedding_size=32, **shape), "TFElectraForPreTraining"
        tokenizer.model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
    keras.utils.set_random_seed(0)
    model = getattr(transformers, class_name).from_config(config)
    model.build_in_name_scope()
    words = CardWords("fill-mask", "a random tiny encoder", "hello", "python -m mlm_tpu.predict")
    facts = CardFacts("mlm", words, config.model_type, class_name[2:], model.count_params())
    save_model_folder(str(folder / family), model, tokenizer, facts)
    return folder / family


class Lines(logging.Handler):
    """What mlm_tpu logs (its logger does not propagate, so pytest's caplog misses it)."""

    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture(scope="module")
def runs(tmp_path_factory, wikitext_tokenizer):
    """Each task fine-tuned by mlm_tpu.fine_tune (the API a benchmark drives) on its shards:
    {run: SimpleNamespace(shards, folder, result, rows (validation), log)}."""
    import mlm_tpu
    from mlm_tpu.console import logger

    tmp = tmp_path_factory.mktemp("encoder")
    tokenizer = wikitext_tokenizer[0]
    bases = {"single": save_base(tmp, "roberta", tokenizer), "pair": save_base(tmp, "bert", tokenizer),
             "regression": None, "tags": save_base(tmp, "electra", tokenizer)}
    protocol = mlm_tpu.FineTuningProtocol(max_length=MAX_LENGTH, num_epochs=8, learning_rate=3e-3, warmup_ratio=0.1,
                                          keep_epoch="best")  # (its best epoch, which best_model.json records)
    found = {}
    for run, base in bases.items():
        shards = shard(tokenizer, tmp, run)
        lines = Lines()
        logger.addHandler(lines)
        try:
            scratch = {} if base else {"model_config": "tiny", "tokenizer": str(tokenizer)}
            result = mlm_tpu.fine_tune(str(shards / "train"), str(shards / "validation"), str(tmp / f"{run}-model"),
                                       model_name_or_path=str(base) if base else None, seed=3, protocol=protocol,
                                       backup_steps=1000, **scratch)
        finally:
            logger.removeHandler(lines)
        rows = [json.loads(line) for line in (tmp / f"{run}-validation.jsonl").read_text().splitlines()]
        found[run] = SimpleNamespace(shards=shards, folder=Path(result.output_dir), result=result, rows=rows,
                                     log=lines.lines, base=base)
    return found


@pytest.mark.slow
def test_each_task_learns_its_synthetic_task(runs):
    expected = {"single": ("accuracy", 0.9), "pair": ("accuracy", 0.9), "regression": ("pearson", 0.8),
                "tags": ("f1", 0.9)}
    for run, (metric, floor) in expected.items():
        result = runs[run].result
        losses = [epoch["loss"] for epoch in result.epochs]
        assert losses[-1] < losses[0], (run, losses)
        assert result.metric == metric and result.scores[metric] >= floor, (run, result.scores)
        assert result.best_epoch == max(result.epochs, key=lambda e: e["validation"][metric])["epoch"]


def predictions(run) -> tuple:
    """The saved model's predictions on the validation rows through the predict API, and the rows' truth."""
    import mlm_tpu

    rows, folder = run.rows, str(run.folder)
    if "ner_tags" in rows[0]:
        tagged = mlm_tpu.predict_token_classification(folder, [" ".join(row["tokens"]) for row in rows])
        return [result["tags"] for result in tagged], [[TAGS[tag] for tag in row["ner_tags"]] for row in rows]
    texts = [f"{row['question']}\t{row['answer']}" if "question" in row else row["text"] for row in rows]
    return mlm_tpu.predict_text_classification(folder, texts), [row.get("label", row.get("score")) for row in rows]


@pytest.mark.slow
@pytest.mark.parametrize("run", list(TASKS))
def test_validation_scores_are_the_libraries_scores_of_the_models_predictions(runs, run):
    """The kept epoch's validation (argmax on the device, the split's ids mapped to the model's, padding rows left
    out) equals scikit-learn's, SciPy's and seqeval's scores of what `predict` says on the same rows."""
    from scipy.stats import pearsonr, spearmanr
    from seqeval.metrics import accuracy_score as tag_accuracy, f1_score as entity_f1, precision_score, recall_score
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    scores = runs[run].result.scores
    predicted, truth = predictions(runs[run])
    if run == "tags":
        expected = {"f1": entity_f1(truth, predicted), "precision": precision_score(truth, predicted),
                    "recall": recall_score(truth, predicted), "accuracy": tag_accuracy(truth, predicted)}
    elif run == "regression":
        values = np.array([result["score"] for result in predicted])
        expected = {"pearson": pearsonr(values, truth)[0], "spearman": spearmanr(values, truth)[0],
                    "loss": float(np.mean((values - np.array(truth)) ** 2))}
    else:
        labels = [result["label"] for result in predicted]
        expected = {"accuracy": accuracy_score(truth, labels), "macro_f1": f1_score(truth, labels, average="macro"),
                    "matthews_correlation": matthews_corrcoef(truth, labels),
                    "loss": -np.mean([np.log(result["scores"][label]) for result, label in zip(predicted, truth)])}
        if run == "pair":  # two classes: also GLUE's F1 of the second ("yes")
            expected["f1"] = f1_score(truth, labels, pos_label="yes")
    assert set(expected) <= set(scores), scores
    for name, value in expected.items():
        assert scores[name] == pytest.approx(value, abs=1e-4), (name, scores, expected)


@pytest.mark.slow
def test_evaluate_scores_the_saved_model_as_its_validation_did(runs):
    import mlm_tpu

    for run in ("pair", "regression", "tags"):
        evaluated = mlm_tpu.evaluate_model(str(runs[run].folder), str(runs[run].shards / "validation"),
                                           per_replica_batch_size=7)  # other batches: the same examples, once each
        assert evaluated.task == TASKS[run]["task"] and evaluated.examples == 60
        for name, value in runs[run].result.scores.items():
            assert evaluated.scores[name] == pytest.approx(value, abs=1e-5), (run, name)


@pytest.mark.slow
def test_the_folder_says_what_it_predicts_and_how_it_was_made(runs):
    """config.json as transformers keeps a head's labels; the log says a pretrained base got a new head (and BERT
    reads token types); the card's pipeline, widget and model-index fit the task; FineTuningResult reads the
    folder back as the run returned it."""
    import mlm_tpu
    from huggingface_hub import ModelCard

    expected = {"single": ("RobertaForSequenceClassification", ["good", "high", "low"], "single_label_classification"),
                "pair": ("BertForSequenceClassification", ["no", "yes"], "single_label_classification"),
                "regression": ("RobertaForSequenceClassification", ["score"], "regression"),
                "tags": ("ElectraForTokenClassification", list(TAGS), None)}
    for run, (architecture, labels, problem_type) in expected.items():
        folder = runs[run].folder
        config = json.loads((folder / "config.json").read_text())
        assert config["architectures"] == [architecture] and config.get("problem_type") == problem_type
        assert list(config["id2label"].values()) == labels
        assert config["label2id"] == {name: index for index, name in enumerate(labels)}
        if runs[run].base:
            assert any(line.startswith(f"Loaded the encoder of {runs[run].base}") and "a new head is initialised" in
                       line for line in runs[run].log), runs[run].log
        assert any(line.startswith("The model reads token_type_ids") for line in runs[run].log) == (
            run in ("pair", "tags"))
        card = ModelCard.load(folder / "README.md")
        pipeline = "token-classification" if run == "tags" else "text-classification"
        assert card.data.pipeline_tag == pipeline and card.data.widget[0]["text"]
        assert card.data.model_name == folder.name
        results = card.data.eval_results  # the model-index: every validation score of the kept epoch
        assert {result.task_type for result in results} == {pipeline}
        assert sorted(result.metric_value for result in results) == pytest.approx(
            sorted(runs[run].result.scores.values()), abs=1e-6)
        again = mlm_tpu.FineTuningResult.of_folder(str(folder))
        assert (again.scores, again.best_epoch, again.task, again.seed) == (
            runs[run].result.scores, runs[run].result.best_epoch, runs[run].result.task, 3)


@pytest.mark.slow
def test_transformers_5_on_pytorch_loads_each_folder_as_its_auto_class_with_the_same_logits_and_labels(runs,
                                                                                                      tmp_path):
    """RoBERTa, BERT and ELECTRA heads, pairs with their token types included: transformers' PyTorch Auto classes
    load model.safetensors with no key missing or left over, and give TensorFlow's logits within 1e-4."""
    import transformers
    from test_export import pytorch_python

    from mlm_tpu.encoder.models import model_inputs

    python = pytorch_python()
    arguments = []
    for run in TASKS:
        folder = runs[run].folder
        head = "TokenClassification" if run == "tags" else "SequenceClassification"
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        model = getattr(transformers, f"TFAutoModelFor{head}").from_pretrained(folder, use_safetensors=False)
        texts = [" ".join(runs[run].rows[0]["tokens"]) if run == "tags" else runs[run].rows[0].get(
            "text", runs[run].rows[0].get("question")), "a short one"]
        pairs = [runs[run].rows[0]["answer"], "and its pair"] if run == "pair" else None
        encoded = tokenizer(texts, pairs, padding=True, return_tensors="np")
        inputs = {name: encoded[name] for name in model_inputs(model.config, tokenizer)}
        np.savez(tmp_path / f"{run}.npz", logits=model(**inputs).logits.numpy(), **inputs)
        arguments += [str(folder), f"AutoModelFor{head}", str(tmp_path / f"{run}.npz")]
    result = subprocess.run([python, str(Path(__file__).parent / "pytorch_check.py"), *arguments],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    found = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(found) == len(TASKS), result.stdout
    for run, checked in zip(TASKS, found):
        config = json.loads((runs[run].folder / "config.json").read_text())
        assert checked["missing"] == [] and checked["unexpected"] == [], (run, checked)
        assert checked["id2label"] == config["id2label"] and checked["max_abs_diff"] < 1e-4, (run, checked)


@pytest.mark.slow
def test_predict_refuses_a_max_length_past_the_models_positions_and_by_default_stops_there(runs, tmp_path):
    """`predict --max-length 1024` on a model that reads 510 positions ended in TensorFlow's "indices[0,855] = 857 is
    not in [0, 512)" (issue 37). Both pipelines refuse it as training refuses longer shards, in one line naming the
    most the model reads (RoBERTa numbers its positions from the pad id 1 + 1, ELECTRA from 0), and that many work.
    A folder that does not say its training length (a Hub model's) cuts inputs to what its model reads, not to 512."""
    long_text = " ".join(WORDS * 10)  # over 1,024 tokens
    cut = {"text-classification": "1 input was cut to {} tokens", "token-classification": "past {} tokens got no tag"}
    for run, pipeline, unread in (("single", "text-classification", 2), ("tags", "token-classification", 0)):
        folder = runs[run].folder
        limit = json.loads((folder / "config.json").read_text())["max_position_embeddings"] - unread
        refused = run_module("mlm_tpu.predict", pipeline, "--model", str(folder), "--max-length", "1024", long_text)
        assert_user_error(refused, "--max-length 1024", f"longer than {folder} reads ({limit} tokens)",
                          f"pass --max-length {limit} or less")
        assert refused.stdout == ""
        at_limit = run_module("mlm_tpu.predict", pipeline, "--model", str(folder), "--max-length", str(limit),
                              "--json", long_text)
        assert at_limit.returncode == 0, at_limit.stderr[-3000:]
        assert cut[pipeline].format(limit) in at_limit.stderr, at_limit.stderr[-3000:]
        assert json.loads(at_limit.stdout)["text"] == long_text
    unsaid = tmp_path / "without-training-length"
    shutil.copytree(runs["tags"].folder, unsaid)
    config = json.loads((unsaid / "config.json").read_text())
    del config["task_specific_params"]
    (unsaid / "config.json").write_text(json.dumps(config))
    tagged = run_module("mlm_tpu.predict", "token-classification", "--model", str(unsaid), "--json", long_text)
    assert tagged.returncode == 0, tagged.stderr[-3000:]
    assert cut["token-classification"].format(config["max_position_embeddings"]) in tagged.stderr, tagged.stderr


def test_the_first_pass_finds_label_names_in_order_and_scores_as_scores(tmp_path):
    """Labels sorted, whole numbers by value (0/1 labels keep their ids); numbers some of which are not whole make
    a regression, unless --problem-type says classes; --labels names ids; tags come as lists or strings."""
    from mlm_tpu.corpus import Corpus, CorpusSource
    from mlm_tpu.encoder.labelled_rows import find_labels

    def found(rows, task="sequence-classification", problem_type=None, given=()):
        path = write_jsonl(tmp_path / "rows.jsonl", rows)
        return find_labels(Corpus(CorpusSource(text_files=(str(path),))), task, ("x",), "y", problem_type, given)

    assert found([{"x": "a", "y": label} for label in (10, 2, 1, 2)]) == ("single_label_classification",
                                                                          ["1", "2", "10"])
    assert found([{"x": "a", "y": label} for label in ("pos", "neg")]) == ("single_label_classification",
                                                                           ["neg", "pos"])
    assert found([{"x": "a", "y": label} for label in (1, "3.5", 0.25)]) == ("regression", [])
    assert found([{"x": "a", "y": label} for label in (1, 3.5)], problem_type="single_label_classification") == (
        "single_label_classification", ["1", "3.5"])
    assert found([{"x": "a", "y": 1}], given=("neg", "pos")) == ("single_label_classification", ["neg", "pos"])
    tags = [{"x": ["Alice", "runs"], "y": ["B-PER", "O"]}, {"x": "Bob sleeps here", "y": "B-PER O O"}]
    assert found(tags, task="token-classification") == ("single_label_classification", ["B-PER", "O"])


def test_a_words_first_piece_is_the_one_running_text_gives_it_with_byte_level_bpe_too():
    """Words given one by one are encoded as in running text (byte-level BPE: a space before each, as 🤗's
    add_prefix_space=True), each word's tag on its first piece and -100 elsewhere."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    from mlm_tpu.encoder.labelled_rows import FixedLengthEncoder, first_piece_labels

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(["the cat sat on the mat", "a catalogue of cats"] * 20, vocab_size=300,
                            special_tokens=["<pad>"])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, pad_token="<pad>")
    features, word_ids, cut = FixedLengthEncoder(tokenizer, 16).words([["the", "catalogue", "sat"]])
    assert cut == 0
    running = tokenizer(" the catalogue sat")["input_ids"]  # each word after a space, the first too
    assert features["input_ids"][0][:len(running)].tolist() == running
    labels = first_piece_labels(word_ids[0], [7, 8, 9])
    assert [label for label in labels if label != -100] == [7, 8, 9]
    assert labels[word_ids[0].index(1)] == 8 and labels.count(-100) == 16 - 3
