"""An embedding model on text: `mlm-tpu predict embed` (each text's vector) and `predict search` (a corpus ranked
for each query), from a folder `--task sentence-embedding` saved or any sentence-transformers folder of an encoder
mlm_tpu reads (its 1_Pooling says the pooling; mean without one).

Texts are cut and padded to --max-length (default: the folder's sentence_bert_config.json max_seq_length, else the
longest input the model reads) and run in fixed-shape batches; padding changes no vector (the pooling reads the real
tokens only)."""

import io
import os
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

from mlm_tpu.configuration import check_ranges, setting
from mlm_tpu.errors import UserError

SENTENCE_BERT_CONFIG = "sentence_bert_config.json"


@dataclass
class EmbeddingPredictionConfig:
    """What `predict embed` and `predict search` do."""

    model: str  # an embedding model's folder
    texts: Tuple[str, ...]  # embed: the texts; search: the queries
    max_length: Optional[int] = setting(None, low=2)  # tokens per text (None: the folder's max_seq_length)
    batch_size: int = setting(32, low=1)  # texts run together
    output: Optional[str] = None  # embed: write the vectors to this .npy file, one row per text
    corpus: Optional[str] = None  # search: a file of documents, one per line (.txt) or BEIR's corpus.jsonl
    top_k: int = setting(10, low=1)  # search: documents shown per query
    beir: Optional[str] = None  # search: a BEIR folder whose split's queries are ranked and scored
    split: str = "test"  # search --beir: the split (its qrels/<split>.tsv)
    run_file: Optional[str] = None  # search --beir: the ranking written here as a TREC run file


class Embedder:
    """A saved embedding model's texts as vectors, on the device."""

    def __init__(self, folder: str, max_length: Optional[int] = None, batch_size: int = 32, flag: str = "--model"):
        import tensorflow as tf

        from mlm_tpu.embedding.encoder import TextEmbedder, pretrained_encoder
        from mlm_tpu.encoder.labelled_rows import FixedLengthEncoder
        from mlm_tpu.model_folder.configs import longest_input
        from mlm_tpu.model_folder.pooling import saved_pooling
        from mlm_tpu.tokenizer.load import load_tokenizer

        tokenizer = load_tokenizer(folder, flag)
        self.model = pretrained_encoder(folder, flag)
        limit = longest_input(self.model.config)
        length = max_length or _max_seq_length(folder) or limit or 512
        if limit and length > limit:
            raise UserError(f"--max-length {length} is more than {folder} reads ({limit} tokens); pass --max-length "
                            f"{limit} or less")
        self.encoder = FixedLengthEncoder(tokenizer, length)
        self.batch_size = batch_size
        embed = TextEmbedder(self.model, saved_pooling(folder))
        self.pooling = embed.pooling
        self._embed = tf.function(lambda ids, mask: embed(ids, mask))

    def __call__(self, texts: List[str]) -> np.ndarray:
        """[texts, width] float32: each text's vector, in fixed-shape batches (the last one padded with empty rows)."""
        rows = []
        for start in range(0, len(texts), self.batch_size):
            part = list(texts[start:start + self.batch_size])
            features, _ = self.encoder.texts(part + [""] * (self.batch_size - len(part)))
            vectors = self._embed(features["input_ids"].astype(np.int32), features["attention_mask"].astype(np.int32))
            rows.append(vectors.numpy()[:len(part)])
        return np.concatenate(rows, axis=0) if rows else np.zeros((0, self.model.config.hidden_size), np.float32)


def _max_seq_length(folder: str) -> Optional[int]:
    from mlm_tpu.jsonfiles import read_json

    path = os.path.join(folder, SENTENCE_BERT_CONFIG)
    return read_json(path, f"{folder}'s {SENTENCE_BERT_CONFIG}", "save the model again").get("max_seq_length") \
        if os.path.isfile(path) else None


def check_embedding_config(config: EmbeddingPredictionConfig, search: bool) -> None:
    """The flags, before TensorFlow loads."""
    check_ranges(config)
    if config.output and not config.output.endswith(".npy"):
        raise UserError(f"--output {config.output}: the vectors are written as NumPy's .npy; name a file ending "
                        ".npy")
    if not search:
        return
    if bool(config.corpus) == bool(config.beir):
        raise UserError("predict search needs --corpus FILE (the documents, one per line, or BEIR's corpus.jsonl) and "
                        "queries, or --beir FOLDER (a BEIR folder's queries against its corpus, scored), not both")
    if config.corpus and not os.path.isfile(config.corpus):
        raise UserError(f"--corpus {config.corpus}: no such file")
    if config.corpus and not config.texts:
        raise UserError("no query: pass the queries as arguments or one per line on stdin")
    if config.beir and config.texts:
        raise UserError("--beir ranks the folder's own queries: drop the queries given")


def embed_texts(config: EmbeddingPredictionConfig) -> np.ndarray:
    """Each text's vector (written to --output when given)."""
    vectors = Embedder(config.model, config.max_length, config.batch_size)(list(config.texts))
    if config.output:
        from mlm_tpu.output_dir import write_file

        stream = io.BytesIO()
        np.save(stream, vectors)
        write_file(config.output, stream.getvalue())
    return vectors


def read_corpus_file(path: str) -> Tuple[List[str], List[str]]:
    """(ids, texts) of --corpus: BEIR's corpus.jsonl (its _id, title and text), or one document per line (ids: line
    numbers from 1)."""
    if path.endswith(".jsonl"):
        from mlm_tpu.embedding.beir import read_corpus

        corpus = read_corpus(path)
        return list(corpus), list(corpus.values())
    with open(path, encoding="utf-8") as stream:
        lines = [(str(number), line.strip()) for number, line in enumerate(stream, start=1) if line.strip()]
    if not lines:
        raise UserError(f"--corpus {path} holds no document: one per line")
    ids, texts = zip(*lines)
    return list(ids), list(texts)


def search_corpus(config: EmbeddingPredictionConfig) -> List[dict]:
    """For each query, the --top-k documents of --corpus by cosine similarity: {"query", "results": [{"id", "score",
    "text"}]}."""
    from mlm_tpu.embedding.search import top_k

    ids, documents = read_corpus_file(config.corpus)
    embedder = Embedder(config.model, config.max_length, config.batch_size)
    scores, rows = top_k(embedder(list(config.texts)), embedder(documents), config.top_k)
    return [{"query": query, "results": [{"id": ids[row], "score": float(score), "text": documents[row]}
                                         for score, row in zip(query_scores, query_rows)]}
            for query, query_scores, query_rows in zip(config.texts, scores, rows)]


def read_beir_split(config: EmbeddingPredictionConfig):
    """--beir's split, read and checked whole, and --run-file checked, before any model loads."""
    from mlm_tpu.embedding.beir import read_beir

    data = read_beir(config.beir, config.split)
    if config.run_file and os.path.exists(config.run_file):
        raise UserError(f"--run-file {config.run_file} exists; name a new file (it is never overwritten)")
    return data


def score_beir(config: EmbeddingPredictionConfig, data) -> dict:
    """--beir: the split's queries ranked against its corpus; nDCG@10, recall@100, MRR@10 (and the run file)."""
    from mlm_tpu.embedding.retrieval import evaluate_retrieval

    embedder = Embedder(config.model, config.max_length, config.batch_size)
    scores = evaluate_retrieval(embedder, data, config.run_file, os.path.basename(os.path.abspath(config.model)))
    return {"beir": config.beir, "split": config.split, "queries": len(data.queries), "documents": len(data.corpus),
            **scores}
