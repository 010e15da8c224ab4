"""The floor a fine-tuned encoder should clear: TF-IDF features of word unigrams and bigrams with a logistic
regression (a ridge regression for scores), fitted with scikit-learn on the same training rows and scored on the same
dev rows with the same metrics. No seed changes it (the solvers are deterministic), so it has no spread.

For reference, NBSVM with bigrams (Wang & Manning 2012), a stronger linear model, scores 79.4 on Rotten Tomatoes and
91.2 on IMDB (their own splits).
"""

from typing import Dict, List, Optional, Tuple

import numpy as np

from mlm_tpu.corpus import Corpus, CorpusSource
from mlm_tpu.encoder.metrics import classification_scores, regression_scores

VECTORIZER = dict(ngram_range=(1, 2), min_df=2, sublinear_tf=True)  # word unigrams and bigrams seen twice or more
CLASSIFIER = dict(C=1.0, max_iter=1000)  # scikit-learn's default strength


def read_rows(source: CorpusSource, columns: Tuple[str, ...]) -> Tuple[List[str], List[object]]:
    """(texts, labels) of a source: the text columns joined by a newline, the last column the label."""
    texts, labels = [], []
    for record in Corpus(source).records(columns, as_text=False):
        *text, label = record.values
        texts.append("\n".join(str(value) for value in text if value is not None))
        labels.append(label)
    return texts, labels


def tfidf_floor(train: CorpusSource, validation: CorpusSource, input_column: str, pair_column: Optional[str],
                target_column: str, regression: bool) -> Dict[str, float]:
    """The dev scores of TF-IDF + logistic regression (ridge for a regression), as fine-tuning scores its runs."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression, Ridge

    columns = (input_column, *([pair_column] if pair_column else []), target_column)
    train_texts, train_labels = read_rows(train, columns)
    dev_texts, dev_labels = read_rows(validation, columns)
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
