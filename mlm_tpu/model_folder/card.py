"""The model card (README.md) of every saved model folder, in the Hub's format.

Metadata the Hub reads (library_name, pipeline_tag, tags, datasets, a widget example written with
the tokenizer's own mask token, and a model-index of the validation scores, which the Hub shows as the
model's evaluation results), then what the model is and how it was made (corpus, tokenizer,
shape, steps, tokens seen, hardware), the validation figures of the saved epoch, the loss plot when
there is one, and how to load it in transformers 5 with PyTorch and in transformers 4 with
TensorFlow. The trainer fills `CardFacts` from the run; the export command from a folder's files.
What a task says of its models (pipeline, summary, widget input, labels) comes from its plug-in
(`CardWords`), so the card knows no task.
"""

import json
import os
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Dict, List, Optional, Protocol, Tuple

from mlm_tpu.corpus import datasets_of, describe_corpus
from mlm_tpu.jsonfiles import read_json
from mlm_tpu.model_folder import families
from mlm_tpu.model_folder.pooling import MODELING_FILE, POOLING_FOLDER, pools_mean
from mlm_tpu.output_dir import RUN_INFO_FILE, write_file, write_json

LOSS_PLOT = "loss.png"
FACTS_FILE = ".card_facts.json"  # what the card says, kept beside it so an export can write it again (not pushed)
SCORE_NAMES = {"loss": "loss", "perplexity": "perplexity", "masked_accuracy": "masked accuracy",
               "token_accuracy": "token accuracy", "accuracy": "accuracy", "macro_f1": "macro F1",
               "exact_match": "exact match", "f1": "token F1", "rouge1": "ROUGE-1", "rouge2": "ROUGE-2",
               "rougeL": "ROUGE-L"}
CORRELATIONS = ("matthews_correlation", "pearson", "spearman")  # shown as numbers, not percentages
METRIC_TYPES = {"macro_f1": "f1", "pearson": "pearsonr", "spearman": "spearmanr"}  # the Hub's metric ids


@dataclass(frozen=True)
class CardWords:
    """What a task says of the models it trains (its plug-in's `card_words`): the card knows no task itself."""

    pipeline_tag: str  # what the Hub calls what the model does ("fill-mask", "text2text-generation")
    summary: str  # what the model is ("a masked language model pretrained from scratch")
    widget_text: str  # the Hub widget's example input, written as the model takes it
    predict_command: str  # how mlm_tpu itself runs the model ("python -m mlm_tpu.predict"; "": it does not)
    labels: Tuple[str, ...] = ()  # a classifier's classes
    scores: Dict[str, str] = field(default_factory=dict)  # its validation scores' names in words, in order


class DescribesItsModels(Protocol):
    """The task plug-in (mlm_tpu.training.task.Task), as far as the card needs it."""

    name: str

    def card_words(self, model, tokenizer) -> CardWords:
        ...


@dataclass
class CardFacts:
    """What the card says; None where it is not known (a folder made elsewhere)."""

    task: str  # the task's name, one word, as tasks.py names it (mlm, electra, span-corruption, ...)
    words: CardWords
    model_type: str
    architecture: str  # transformers' class name, without "TF"
    parameters: int
    layers: Optional[int] = None
    hidden_size: Optional[int] = None
    vocab_size: Optional[int] = None
    corpus: Optional[dict] = None  # a shards manifest's settings["corpus"]
    max_length: Optional[int] = None
    steps: Optional[int] = None
    epoch: Optional[int] = None  # the saved epoch
    global_batch_size: Optional[int] = None
    hardware: Optional[str] = None
    validation: Dict[str, float] = field(default_factory=dict)  # the saved epoch's scores
    validation_corpus: Optional[dict] = None  # the validation shards' manifest's settings["corpus"]
    mean_pooled: bool = False  # a classifier whose head reads the mean (pooling.py): PyTorch loads its own class
    base_model: Optional[str] = None  # the checkpoint the run started from, as given (--model-name-or-path)
    base_model_hub_id: Optional[str] = None  # its name on the Hub (hub_name), the metadata's base_model
    validation_before_training: Dict[str, float] = field(default_factory=dict)  # the checkpoint's scores, as loaded
    tensorflow_folder: bool = True  # tf_model.h5 beside model.safetensors (families.py: transformers' TF classes')

    @classmethod
    def of_model(cls, task: DescribesItsModels, model, tokenizer, **run) -> "CardFacts":
        """What the task's plug-in says of the model, what the model itself says (type, class, size, shape,
        vocabulary), and `run`'s facts."""
        config, family = model.config, families.of_model(model)
        mean_pooled = pools_mean(config, type(model).__name__) and not family.pools_natively
        return cls(task=task.name, words=task.card_words(model, tokenizer), model_type=families.model_type(config),
                   architecture=type(model).__name__.removeprefix("TF"), parameters=model.count_params(),
                   layers=getattr(config, "num_hidden_layers", None) or getattr(config, "num_layers", None),
                   hidden_size=getattr(config, "hidden_size", None) or getattr(config, "d_model", None),
                   vocab_size=config.vocab_size, mean_pooled=mean_pooled, tensorflow_folder=family.tensorflow_layout,
                   **run)

    def about(self, task: DescribesItsModels, model, tokenizer) -> "CardFacts":
        """The same run's facts about another model it trained (ELECTRA's generator, beside its discriminator)."""
        own = CardFacts.of_model(task, model, tokenizer)
        return replace(self, **{name: getattr(own, name) for name in _MODEL_FACTS})

    @property
    def tokens_seen(self) -> Optional[int]:
        if self.steps and self.global_batch_size and self.max_length:
            return self.steps * self.global_batch_size * self.max_length
        return None


# what `of_model` reads from the model and its task; the other facts are the run's
_MODEL_FACTS = ("task", "words", "model_type", "architecture", "parameters", "layers", "hidden_size", "vocab_size",
                "mean_pooled")


def _how_it_was_made(facts: CardFacts) -> List[str]:
    lines = [f"- **Model**: {facts.architecture} ({facts.model_type}), {facts.parameters:,} parameters"
             + (f", {facts.layers} layers of width {facts.hidden_size}" if facts.layers else "")
             + (f", a vocabulary of {facts.vocab_size:,}" if facts.vocab_size else ""),
             f"- **Corpus**: {describe_corpus(facts.corpus)}"]
    if facts.base_model:
        lines.append(f"- **Started from**: {facts.base_model}")
    if facts.steps:
        lines.append(f"- **Training**: {facts.steps:,} steps" + (f" (epoch {facts.epoch} saved)" if facts.epoch else "")
                     + (f" of {facts.global_batch_size} examples" if facts.global_batch_size else "")
                     + (f" of {facts.max_length} tokens" if facts.max_length else ""))
    if facts.tokens_seen:
        lines.append(f"- **Tokens seen**: {facts.tokens_seen:,}")
    if facts.hardware:
        lines.append(f"- **Hardware**: {facts.hardware}")
    if facts.words.labels:
        lines.append(f"- **Labels**: {', '.join(facts.words.labels)}")
    return lines


def _pytorch_usage(facts: CardFacts, name: str) -> List[str]:
    """How transformers 5 runs it: its pipeline; for a mean-pooled classifier, the class that comes with the folder
    (trust_remote_code), and its encoder in sentence-transformers."""
    words = facts.words
    if not facts.mean_pooled:
        return ["With transformers 5 and PyTorch (`model.safetensors`):", "",
                "```python", "from transformers import pipeline", "",
                f'pipe = pipeline("{words.pipeline_tag}", model="{name}")',
                f'print(pipe({words.widget_text!r}))', "```"]
    return [f"Its head reads the mean of the last hidden states over the real tokens (`classifier_pooling: mean` in "
            f"config.json), which transformers' own {facts.architecture} does not: the class that does comes with "
            f"the folder (`{MODELING_FILE}`), and transformers 5 runs it with `trust_remote_code=True` (without it, "
            "transformers builds its own class, which reads the first token and predicts otherwise):", "",
            "```python", "from transformers import AutoModelForSequenceClassification, pipeline", "",
            f'model = AutoModelForSequenceClassification.from_pretrained("{name}", trust_remote_code=True)',
            f'pipe = pipeline("{words.pipeline_tag}", model="{name}", trust_remote_code=True)',
            f'print(pipe({words.widget_text!r}))', "```", "",
            "Its encoder, mean-pooled, embeds texts with sentence-transformers (`modules.json`, "
            f"`{POOLING_FOLDER}/config.json`):", "",
            "```python", "from sentence_transformers import SentenceTransformer", "",
            f'embeddings = SentenceTransformer("{name}").encode([{words.widget_text!r}])', "```"]


def _usage(facts: CardFacts, name: str) -> List[str]:
    words = facts.words
    tensorflow = [
        "With transformers 4 and TensorFlow (`tf_model.h5`; `use_safetensors=False` because transformers 4.55 to "
        "4.57 read `model.safetensors` first and fail on PyTorch-format files, huggingface/transformers#40028):", "",
        "```python", f"from transformers import TF{facts.architecture}, AutoTokenizer", "",
        f'model = TF{facts.architecture}.from_pretrained("{name}", use_safetensors=False)',
        f'tokenizer = AutoTokenizer.from_pretrained("{name}")', "```"] if facts.tensorflow_folder else []
    return [
        "## Use it", "", *_pytorch_usage(facts, name), *([""] + tensorflow if tensorflow else []),
        *(["", f'or with mlm_tpu itself: `{words.predict_command} --model {name} "..."`'
               + (" (mlm_tpu's loading follows `classifier_pooling`; transformers' TensorFlow class reads the first "
                  "token)." if facts.mean_pooled else ".")] if words.predict_command else []),
    ]


def _score(name: str, value: float) -> str:
    if name in CORRELATIONS or name.endswith("loss"):  # a generator's or discriminator's too
        return f"{value:.4f}"
    return f"{value:.2f}" if name == "perplexity" else f"{value:.2%}"


def _shown_scores(facts: CardFacts) -> Dict[str, str]:
    """The validation scores the card shows, each with its name in words, in a fixed order (the task's first)."""
    words = {**facts.words.scores, **{name: word for name, word in SCORE_NAMES.items()
                                      if name not in facts.words.scores}}
    return {name: word for name, word in words.items() if name in facts.validation}


def _validation_table(facts: CardFacts, shown: Dict[str, str]) -> List[str]:
    """The saved epoch's scores; beside them, a continued run's scores of its checkpoint as loaded (what continuing
    bought)."""
    def cells(scores: Dict[str, float]) -> str:
        return " | ".join(_score(name, scores[name]) if name in scores else "" for name in shown)

    if not facts.validation_before_training:
        return ["| " + " | ".join(shown.values()) + " |", "|" + " --- |" * len(shown), f"| {cells(facts.validation)} |"]
    return ["| | " + " | ".join(shown.values()) + " |", "| --- |" + " --- |" * len(shown),
            f"| {facts.base_model or 'the checkpoint'}, as loaded | {cells(facts.validation_before_training)} |",
            f"| after {facts.steps or 0:,} steps of continued pretraining | {cells(facts.validation)} |"]


def hub_name(name_or_path: Optional[str]) -> Optional[str]:
    """What a card's metadata may call the model a run started from (the Hub takes a `base_model` that names a model
    there): a Hub name as given; a local folder, the name mlm_tpu pushed it under (its training_args.json's
    hub_model_id), else None, as transformers' own cards leave a local base out."""
    if not name_or_path or name_or_path.startswith("gs://"):
        return None
    if not os.path.isdir(name_or_path):
        return name_or_path
    try:
        with open(os.path.join(name_or_path, RUN_INFO_FILE), encoding="utf-8") as stream:
            recorded = json.load(stream).get("hub_model_id")
    except (OSError, ValueError, AttributeError):  # none, or not a record of ours
        return None
    return recorded if isinstance(recorded, str) and recorded else None


def _eval_results(facts: CardFacts, words: Dict[str, str]):
    """The model-index entries (huggingface_hub's EvalResult) of the validation scores: the task, the validation
    data (a Hub dataset by its name; local files as such) and each score."""
    from huggingface_hub import EvalResult

    corpus = facts.validation_corpus or {}
    hub = datasets_of(corpus)
    dataset = {"dataset_type": hub[0] if hub else "local-files", "dataset_name": describe_corpus(corpus),
               "dataset_config": corpus.get("dataset_config") if hub else None,
               "dataset_split": corpus.get("split") if hub else None}
    return [EvalResult(task_type=facts.words.pipeline_tag, **dataset, metric_type=METRIC_TYPES.get(name, name),
                       metric_name=word, metric_value=round(float(facts.validation[name]), 6))
            for name, word in words.items()]


def model_card_text(facts: CardFacts, name: str, has_loss_plot: bool) -> str:
    """The README.md, metadata and all."""
    from huggingface_hub import ModelCard, ModelCardData

    words = facts.words
    shown = _shown_scores(facts)
    data = ModelCardData(library_name="transformers", pipeline_tag=words.pipeline_tag,
                         tags=["mlm_tpu", facts.model_type, facts.task, "tensorflow", "pytorch", "safetensors"],
                         datasets=datasets_of(facts.corpus) or None, widget=[{"text": words.widget_text}],
                         base_model=facts.base_model_hub_id, model_name=name if shown else None,
                         eval_results=_eval_results(facts, shown) if shown else None)
    body = [f"# {name}", "", f"{words.summary[0].upper()}{words.summary[1:]}, "
            "trained with mlm_tpu on TensorFlow and 🤗 Transformers.", "",
            "## How it was made", "", *_how_it_was_made(facts), ""]
    if shown:
        body += ["## Validation", "", *_validation_table(facts, shown), ""]
    if has_loss_plot:
        body += ["## Loss", "", f"![training and validation loss]({LOSS_PLOT})", ""]
    body += _usage(facts, name)
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(body) + "\n").content


def write_model_card(folder: str, facts: CardFacts, name: Optional[str] = None,
                     has_loss_plot: Optional[bool] = None) -> None:
    """Write README.md, and the facts it says (FACTS_FILE), into `folder` (`name`: what the card calls the model,
    default the folder's name; the loss plot is shown when the folder has one, unless said otherwise)."""
    name = name or os.path.basename(os.path.abspath(folder))
    if has_loss_plot is None:
        has_loss_plot = os.path.isfile(os.path.join(folder, LOSS_PLOT))
    write_json(os.path.join(folder, FACTS_FILE), asdict(facts))
    write_file(os.path.join(folder, "README.md"), model_card_text(facts, name, has_loss_plot).encode())


def recorded_card_facts(folder: str) -> Optional[CardFacts]:
    """The facts of the card mlm_tpu wrote in `folder`, if it kept them (versions before records did not)."""
    path = os.path.join(folder, FACTS_FILE)
    if not os.path.isfile(path):
        return None
    stored = read_json(path, "the facts of the model card", "or delete it")
    known = {facts_field.name for facts_field in fields(CardFacts)}
    try:
        words = stored["words"]
        return CardFacts(**{key: value for key, value in stored.items() if key in known and key != "words"},
                         words=CardWords(**{**words, "labels": tuple(words.get("labels", ())),
                                            "scores": dict(words.get("scores") or {})}))
    except (AttributeError, TypeError, KeyError):  # not a dict, or a field missing: written by something else
        return None
