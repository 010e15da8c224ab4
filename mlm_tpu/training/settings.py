"""Settings several tasks share (their settings dataclasses, in their folders, derive from these), and the masking
that evaluation and inspection take too. Each field with `help` is a flag (cli/flags.py's `add_settings`); `{who}`
in a help is filled in by the command: whom the flag is for.
"""

from dataclasses import KW_ONLY, dataclass
from typing import Optional

from mlm_tpu.configuration import setting


@dataclass
class BestModelSettings:
    """A task whose output folder keeps the epoch of the best validation score (T5 text-to-text, encoders)."""

    metric_for_best_model: Optional[str] = setting(  # the validation score whose best epoch is kept
        None, group="task",
        help="T5 and encoder tasks with --eval-dataset: the validation score whose best epoch the output folder keeps "
             "(classification: accuracy (default), macro_f1; generation: exact_match, f1, rouge1, rouge2, rougeL "
             "(default); sequence-classification: accuracy (default), macro_f1, matthews_correlation, f1 (two "
             "classes), loss, or for scores pearson (default), spearman, loss; token-classification: f1 (default), "
             "precision, recall, accuracy, loss). Encoder tasks also take several, comma-separated: their mean decides "
             "(GLUE's MRPC score: f1,accuracy).")


MASKINGS = ("token", "whole-word", "span")  # --masking (mlm/masking.py)


@dataclass
class MaskingSettings:
    """How a masked LM's rows are masked (mlm/masking.py): in training, evaluation and inspection, whose configs
    (EvaluationConfig, InspectionConfig) take these fields from here."""

    _: KW_ONLY  # given by name: so a config that adds its own fields (the model, the shards) takes them first

    mlm_probability: Optional[float] = setting(  # the share of tokens masked (None: 0.15)
        None, low=0, high=1, low_open=True, high_open=True, group="task",
        help="{who}: share of tokens masked (default: {probability_default}).")
    masking: Optional[str] = setting(  # token | whole-word | span (None: token)
        None, group="task", choices=MASKINGS,
        help="{who}: token: each token masked on its own (🤗's collator; the default); for --task electra, "
             "ELECTRA's: exactly round(--mlm-probability x the row's tokens) in each row. whole-word: every piece of a "
             "chosen word (BERT's whole-word masking), words taken at random while they fit a budget of "
             "round(--mlm-probability x the row's tokens), a word that does not fit skipped. span: SpanBERT's spans "
             "of whole words, their lengths in words geometric (p = 0.2, at most 10, mean 3.8), until that share is "
             "masked. Words are read from the tokenizer's marks: ▁ (Unigram), Ġ (byte-level BPE), ## (WordPiece).")
    mask_replace_prob: Optional[float] = setting(  # masked tokens made the mask token (None: the task's, 0.8)
        None, low=0, high=1, group="task", metavar="P",
        help="{who}: share of the masked tokens that become the mask token (default: 0.8; for --task electra, "
             "ELECTRA's 0.85; 🤗's DataCollatorForLanguageModeling's name and meaning). Decided per token, but per "
             "span with --masking span, as SpanBERT does.")
    random_replace_prob: Optional[float] = setting(  # masked tokens made a random one (None: the task's, 0.1)
        None, low=0, high=1, group="task", metavar="P",
        help="{who}: share of the masked tokens that become a random token (default: 0.1; for --task electra, "
             "ELECTRA's 0); the rest, 1 - --mask-replace-prob - --random-replace-prob, stay unchanged (still "
             "predicted).")
