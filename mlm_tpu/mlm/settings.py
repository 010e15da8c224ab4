"""The settings of `--task mlm` (and of ELECTRA's generator, electra/settings.py): how rows are masked, and the
masked-LM head. No TensorFlow here: flags are checked before it loads.

Each field is also a flag of `python train.py` (cli/train.py generates them from the fields' metadata); the
masking's four are flags of evaluation and inspection too, whose help names who they are for (`{who}`).
"""

from dataclasses import dataclass
from typing import Optional

from mlm_tpu.configuration import setting

MASKINGS = ("token", "whole-word", "span")  # --masking (masking.py)


@dataclass
class MaskingSettings:
    """How a masked LM's rows are masked (masking.py): in training, evaluation and inspection."""

    mlm_probability: Optional[float] = setting(  # the share of tokens masked (None: 0.15)
        None, low=0, high=1, low_open=True, high_open=True, group="task",
        help="{who}: share of tokens masked (default: {probability_default}).")
    masking: Optional[str] = setting(  # token | whole-word | span (None: token)
        None, group="task", choices=MASKINGS,
        help="{who}: token: each token masked on its own (🤗's collator; the default). whole-word: every piece of a "
             "chosen word (BERT's whole-word masking), words taken at random until --mlm-probability of a row's "
             "tokens are masked. span: SpanBERT's spans of whole words, their lengths in words geometric (p = 0.2, "
             "at most 10, mean 3.8), until that share is masked. Words are read from the tokenizer's marks: ▁ "
             "(Unigram), Ġ (byte-level BPE), ## (WordPiece).")
    mask_replace_prob: Optional[float] = setting(  # masked tokens made the mask token (None: 0.8)
        None, low=0, high=1, group="task", metavar="P",
        help="{who}: share of the masked tokens that become the mask token (default: 0.8; 🤗's "
             "DataCollatorForLanguageModeling's name and meaning). Decided per token, but per span with --masking "
             "span, as SpanBERT does.")
    random_replace_prob: Optional[float] = setting(  # masked tokens made a random one (None: 0.1)
        None, low=0, high=1, group="task", metavar="P",
        help="{who}: share of the masked tokens that become a random token (default: 0.1); the rest, 1 - "
             "--mask-replace-prob - --random-replace-prob, stay unchanged (still predicted).")


@dataclass
class MaskedLmSettings(MaskingSettings):
    """`--task mlm`: the masking, and where the masked-LM head runs."""

    # the head at every position (not only the masked ones): the same loss, computed as before; free on resuming
    dense_mlm_head: bool = setting(
        False, changes_result=False, group="task",
        help="--task mlm (and electra's generator): run the masked-LM head at every position, as before, rather "
             "than at the masked positions only (the sparse head, the default: the same loss, the head's work saved "
             "at the other positions). For comparison; the saved model is the same kind either way.")
    # the sparse head: prediction slots per row (None: enough for all but 1e-6 of rows, prediction_slots.py)
    max_predictions_per_seq: Optional[int] = setting(
        None, low=1, group="task", metavar="SLOTS",
        help="--task mlm and electra, sparse head: prediction slots per row (BERT's max_predictions_per_seq). A row "
             "with more masked positions keeps this many, drawn at random, and leaves the others unmasked; each "
             "epoch's log line counts them (default: the fewest slots a row outgrows with probability below 1e-6 at "
             "--mlm-probability, e.g. 41 of 128 positions at 0.15). With --masking whole-word or span, rows mask at "
             "most this many, never part of a word (default: a full row's share at --mlm-probability, and 4 for the "
             "word that crosses it: 23 of 128 at 0.15).")
