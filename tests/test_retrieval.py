"""Retrieval on BEIR folders (issue 58): exact search against brute force, nDCG@10 as trec_eval computes it from the
written run file, the built-in inverse cloze task, and bad BEIR folders (one error line, nothing written)."""

import json

import numpy as np
import pytest

from conftest import assert_user_error, write_jsonl
from test_embedding import saved_encoder


def write_beir(folder, paragraphs, queries: int = 12):
    """A BEIR folder from real text: each of the first `queries` paragraphs' first sentence-like third is a query, its
    rest the relevant document (grade 2), the next paragraph's rest a partly relevant one (grade 1); every other
    paragraph a distractor."""
    (folder / "qrels").mkdir(parents=True)
    write_jsonl(folder / "corpus.jsonl", [{"_id": f"d{index}", "title": "", "text": " ".join(words[len(words) // 3:])}
                                          for index, words in enumerate(paragraphs)])
    write_jsonl(folder / "queries.jsonl", [{"_id": f"q{index}", "text": " ".join(words[:len(words) // 3])}
                                           for index, words in enumerate(paragraphs[:queries])])
    lines = [f"q{index}\td{index}\t2\nq{index}\td{index + 1}\t1" for index in range(queries)]
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(lines) + "\n")
    return folder


def read_trec_run(path) -> dict:
    """A TREC run file (`query Q0 document rank score name` lines) as pytrec_eval takes a run."""
    run = {}
    for line in open(path, encoding="utf-8"):
        query, _, document, _, score, _ = line.split()
        run.setdefault(query, {})[document] = float(score)
    return run


@pytest.fixture(scope="module")
def paragraphs(wikitext_path):
    return [line.split() for line in wikitext_path.read_text(encoding="utf-8").splitlines()
            if len(line.split()) > 30 and not line.strip().startswith("=")][:60]


def test_exact_search_in_chunks_ranks_as_brute_force():
    from mlm_tpu.embedding.search import top_k

    generator = np.random.default_rng(0)
    queries, documents = generator.normal(size=(7, 16)), generator.normal(size=(50, 16))
    scores, rows = top_k(queries, documents, 5, chunk=8)  # 7 chunks, the last of 2 documents
    cosines = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ \
        (documents / np.linalg.norm(documents, axis=1, keepdims=True)).T
    assert (rows == np.argsort(-cosines, axis=1)[:, :5]).all()
    assert np.allclose(scores, np.take_along_axis(cosines, rows, axis=1), atol=1e-5)


def test_ndcg_equals_trec_eval_on_the_run_file_it_writes(tmp_path, paragraphs, wikitext_tokenizer, in_process):
    """predict search --beir writes its ranking as a TREC run file; pytrec-eval-terrier (trec_eval) reading that file
    and the qrels gives the nDCG@10 and recall@100 the command printed, with graded relevance."""
    import pytrec_eval

    from mlm_tpu.embedding.beir import read_qrels

    model = tmp_path / "model"
    saved_encoder(model, "tiny", wikitext_tokenizer[0])
    beir = write_beir(tmp_path / "beir", paragraphs)
    result = in_process("predict", "search", "--model", model, "--beir", beir, "--run-file", tmp_path / "run.trec")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    run = read_trec_run(str(tmp_path / "run.trec"))
    assert len(run) == 12 and all(len(found) == 60 for found in run.values())
    evaluated = pytrec_eval.RelevanceEvaluator(read_qrels(str(beir / "qrels" / "test.tsv")),
                                               {"ndcg_cut.10", "recall.100"}).evaluate(run)
    assert printed["ndcg@10"] == pytest.approx(np.mean([row["ndcg_cut_10"] for row in evaluated.values()]), abs=1e-9)
    assert printed["recall@100"] == pytest.approx(1.0) and 0 < printed["ndcg@10"] < 1
    assert (printed["queries"], printed["documents"]) == (12, 60)


def test_the_inverse_cloze_task_is_a_sentence_and_its_review_without_it(tmp_path):
    from mlm_tpu.downstream.inverse_cloze import TEST_QUERIES, TRAIN_QUERIES, write_inverse_cloze
    from mlm_tpu.embedding.beir import read_beir

    folder = write_inverse_cloze(str(tmp_path / "ict"))
    train, test = read_beir(folder, "train"), read_beir(folder, "test")
    assert (len(train.queries), len(test.queries), len(test.corpus)) == (TRAIN_QUERIES, TEST_QUERIES,
                                                                         TRAIN_QUERIES + TEST_QUERIES)
    assert not set(train.qrels) & set(test.qrels)
    for query, judged in list(test.qrels.items())[:50]:
        (document, grade), = judged.items()
        sentence, rest = test.queries[query], test.corpus[document]
        assert grade == 1 and sentence not in rest and len(rest.split()) > len(sentence.split())
    write_inverse_cloze(str(tmp_path / "again"))  # the same files on every machine (seed 0)
    assert (tmp_path / "ict" / "corpus.jsonl").read_bytes() == (tmp_path / "again" / "corpus.jsonl").read_bytes()


@pytest.mark.parametrize("breaks, phrases", [
    (lambda beir: (beir / "qrels" / "test.tsv").unlink(), ["has no qrels/test.tsv"]),
    (lambda beir: (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td999\t1\n"),
     ["names document ids not in corpus.jsonl (d999)"]),
    (lambda beir: (beir / "queries.jsonl").write_text('{"_id": "q0", "text": "  "}\n'), ["the query 'q0' is empty"]),
    (lambda beir: (beir / "corpus.jsonl").write_text('{"_id": "d0", "text": "a"}\n{"_id": "d0", "text": "b"}\n'),
     ["the document id 'd0' is given twice"]),
])
def test_a_bad_beir_folder_is_one_error_line_and_nothing_is_written(breaks, phrases, tmp_path, paragraphs,
                                                                    in_process):
    beir = write_beir(tmp_path / "beir", paragraphs)
    breaks(beir)
    result = in_process("predict", "search", "--model", tmp_path / "no-model-needed", "--beir", beir, "--run-file",
                        tmp_path / "run.trec")
    assert_user_error(result, *phrases)
    assert not (tmp_path / "run.trec").exists()
