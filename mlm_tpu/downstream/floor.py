"""The floor a fine-tuned encoder should clear: TF-IDF features of word unigrams and bigrams with a logistic
regression (a ridge regression for scores), fitted with scikit-learn on the same training rows and scored on the same
dev rows with the same metrics, reading what the model reads: each text cut to the whole words the model's tokenizer
keeps (beside it, when texts were cut, the same floor on the whole texts). No seed changes it (the solvers are
deterministic), so it has no spread.

For reference, NBSVM with bigrams (Wang & Manning 2012), a stronger linear model, scores 79.4 on Rotten Tomatoes and
91.2 on IMDB (their own splits).
"""

import functools
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from mlm_tpu.corpus import Corpus, CorpusSource
from mlm_tpu.encoder.metrics import classification_scores, regression_scores

VECTORIZER = dict(ngram_range=(1, 2), min_df=2, sublinear_tf=True)  # word unigrams and bigrams seen twice or more
CLASSIFIER = dict(C=1.0, max_iter=1000)  # scikit-learn's default strength


def read_rows(source: CorpusSource, columns: Tuple[str, ...]) -> Tuple[List[List[str]], List[object]]:
    """(the texts of each text column, the labels) of a source: the last column is the label."""
    texts: List[List[str]] = [[] for _ in columns[:-1]]
    labels = []
    for record in Corpus(source).records(columns, as_text=False):
        *text, label = record.values
        for column, value in zip(texts, text):
            column.append("" if value is None else str(value))
        labels.append(label)
    return texts, labels


def joined(sides: Sequence[Optional[List[str]]]) -> List[str]:
    """Each row's text and pair (if any) as one text, joined by a newline."""
    return ["\n".join(row) for row in zip(*[side for side in sides if side is not None])]


def tfidf_floor(train: CorpusSource, validation: CorpusSource, input_column: str, pair_column: Optional[str],
                target_column: str, regression: bool, tokenizer, max_length: int) -> dict:
    """The floor's dev scores on what the model reads: each text (and pair) cut to the whole words the model's
    tokenizer keeps at `max_length` tokens (words.py: the text every row of the benchmark reads); beside them, when
    some texts were cut, its scores on the whole texts (on IMDB at 64 tokens: about 70 against 84). {"scores",
    "texts_cut": cut rows (training, dev), "words_per_row": the mean over training and dev rows, "whole_text_scores"
    and "whole_words_per_row" (only when some were cut)}."""
    from mlm_tpu.downstream.words import kept_words, words_per_row

    columns = (input_column, *([pair_column] if pair_column else []), target_column)
    train_texts, train_labels = read_rows(train, columns)
    dev_texts, dev_labels = read_rows(validation, columns)
    *train_kept, train_cut = kept_words(tokenizer, max_length, *train_texts)
    *dev_kept, dev_cut = kept_words(tokenizer, max_length, *dev_texts)
    fit = functools.partial(fitted_scores, train_labels=train_labels, dev_labels=dev_labels, regression=regression)
    floor = {"scores": fit(joined(train_kept), joined(dev_kept)), "texts_cut": [train_cut, dev_cut],
             "words_per_row": words_per_row(*both(train_kept, dev_kept))}
    if train_cut or dev_cut:
        floor["whole_text_scores"] = fit(joined(train_texts), joined(dev_texts))
        floor["whole_words_per_row"] = words_per_row(*both(train_texts, dev_texts))
    return floor


def both(train: Sequence[Optional[List[str]]], dev: Sequence[Optional[List[str]]]) -> List[Optional[List[str]]]:
    """Each column's training rows, then its dev rows."""
    return [None if first is None else first + second for first, second in zip(train, dev)]


def fitted_scores(train_texts: List[str], dev_texts: List[str], train_labels: List[object], dev_labels: List[object],
                  regression: bool) -> Dict[str, float]:
    """The dev scores of TF-IDF + logistic regression (ridge for a regression), as fine-tuning scores its runs."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression, Ridge

    vectorizer = TfidfVectorizer(**VECTORIZER)
    features = vectorizer.fit_transform(train_texts)
    dev_features = vectorizer.transform(dev_texts)
    if regression:
        model = Ridge().fit(features, np.asarray(train_labels, dtype=np.float64))
        return regression_scores(model.predict(dev_features), np.asarray(dev_labels, dtype=np.float64))
    names = sorted({str(label) for label in train_labels}, key=_label_order)
    ids = {name: index for index, name in enumerate(names)}
    model = LogisticRegression(**CLASSIFIER).fit(features, [ids[str(label)] for label in train_labels])
    truth = np.asarray([ids.get(str(label), -1) for label in dev_labels])
    probabilities = model.predict_proba(dev_features)
    losses = -np.log(np.clip(probabilities[np.arange(len(truth)), np.maximum(truth, 0)], 1e-12, None))
    return classification_scores(model.predict(dev_features), truth, losses, len(names))


def _label_order(name: str):
    """Labels as the sharder orders them: numbers by value, before names."""
    try:
        return (0, float(name), "")
    except ValueError:
        return (1, 0.0, name)
