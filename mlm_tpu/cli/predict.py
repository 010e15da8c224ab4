"""`python -m mlm_tpu.predict [fill-mask|text2text|text-classification|token-classification] ...` (also `mlm-tpu
predict`): try a trained model on text.

fill-mask (the default): the top-k words for each [MASK] of each sentence, from a masked LM.
text2text: a T5 model's label (classifiers trained here) or generated text.
text-classification: an encoder classifier's label and probabilities (or a regression's score).
token-classification: an encoder tagger's tag for each word, and the entities they make.
embed: an embedding model's vector for each text; search: a corpus ranked for each query, or a BEIR folder scored.
Texts come as arguments, or one per line on stdin; results as a table, or JSON lines with --json.
"""

import argparse
import json
import sys
from typing import Callable, List, Optional, Sequence

from mlm_tpu.cli.flags import ConfigFlags, add_flag, add_verbose_flag
from mlm_tpu.cli.inputs import read_texts
from mlm_tpu.console import import_tensorflow, quiet_libraries
from mlm_tpu.embedding import prediction as embedding_prediction
from mlm_tpu.embedding.prediction import EmbeddingPredictionConfig
from mlm_tpu.encoder import prediction as encoder_prediction
from mlm_tpu.encoder.prediction import EncoderPredictionConfig
from mlm_tpu.mlm import fill_mask
from mlm_tpu.mlm.fill_mask import FillMaskConfig, Predictions
from mlm_tpu.t5 import prediction
from mlm_tpu.t5.prediction import Text2TextPredictionConfig
from mlm_tpu.tasks import PIPELINES, saved_model_loader

FILL_MASK_FLAGS = ConfigFlags(FillMaskConfig)
TEXT2TEXT_FLAGS = ConfigFlags(Text2TextPredictionConfig)
ENCODER_FLAGS = ConfigFlags(EncoderPredictionConfig)
EMBEDDING_FLAGS = ConfigFlags(EmbeddingPredictionConfig)


def format_table(sentence: str, predictions: Predictions) -> str:
    lines = [sentence]
    for number, candidates in enumerate(predictions, start=1):
        if len(predictions) > 1:
            lines.append(f"  mask {number} of {len(predictions)}:")
        shown = [repr(c["token_str"]) if not c["token_str"].strip() else c["token_str"] for c in candidates]
        width = max(map(len, shown))
        lines += [f"  {rank:>2}. {word:<{width}}  {c['score']:.4f}  {c['sequence']}"
                  for rank, (word, c) in enumerate(zip(shown, candidates), start=1)]
    return "\n".join(lines) + "\n"


def texts_parser(prog: str, description: str, texts_field: str, metavar: str, texts_help: str,
                 flags: ConfigFlags, model_help: str, **kwargs) -> argparse.ArgumentParser:
    """A prediction command's parser: the texts, --model, then what the caller adds (see `with_output_flags`)."""
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)
    parser.add_argument(texts_field, nargs="*", metavar=metavar, help=texts_help)
    flags.add(parser, "--model", "--model-name-or-path", required=True,
              help=model_help + " An adapter folder (`train.py --delta`) runs on its base model.")
    flags.add(parser, "--base-model",
              help="An adapter folder's base model (a folder or Hub name), in place of the one its adapter_config.json "
                   "names (base_model_name_or_path).")
    return parser


def with_output_flags(parser: argparse.ArgumentParser, json_help: str) -> argparse.ArgumentParser:
    add_flag(parser, "--json", action="store_true", help=json_help)
    add_verbose_flag(parser)
    return parser


def fill_mask_parser(prog: str) -> argparse.ArgumentParser:
    parser = texts_parser(f"{prog} [fill-mask]", fill_mask.__doc__, "sentences", "SENTENCE",
                          "Text with [MASK] (or <mask>) where a word is missing; none: read lines from stdin.",
                          FILL_MASK_FLAGS, "The trained model: `python train.py`'s --output-dir, a save_pretrained "
                                           "folder or a Hub name.", epilog=f"T5 models: {prog} text2text --help. Encoder "
                                           f"classifiers and taggers: {prog} text-classification --help, "
                                           f"{prog} token-classification --help.")
    FILL_MASK_FLAGS.add(parser, "--top-k", type=int, help="Candidates shown per mask.")
    return with_output_flags(parser, 'One JSON object per sentence on stdout: {"sentence", "predictions": [[{"token", '
                                     '"token_str", "score", "sequence"}, ...] per mask]}.')


def text2text_parser(prog: str) -> argparse.ArgumentParser:
    parser = texts_parser(f"{prog} text2text", prediction.__doc__, "inputs", "INPUT",
                          "Input texts; none: read lines from stdin.", TEXT2TEXT_FLAGS,
                          "A T5 model: `python train.py --task classification|generation`'s --output-dir, a "
                          "save_pretrained folder or a Hub name.")
    TEXT2TEXT_FLAGS.add(parser, "--task", choices=("classification", "generation"),
                        help="What to do (default: what the model was trained for; generation for other T5 models).")
    TEXT2TEXT_FLAGS.add(parser, "--labels", nargs="+", metavar="LABEL",
                        help="Classification: the class names (default: those the model was trained with).")
    TEXT2TEXT_FLAGS.add(parser, "--max-length", type=int,
                        help="Input tokens; longer inputs keep their first and last halves (default: the training "
                             "length, else the tokenizer's limit).")
    TEXT2TEXT_FLAGS.add(parser, "--max-new-tokens", type=int,
                        help="Generation: tokens to generate (default: the training setting, else 32).")
    TEXT2TEXT_FLAGS.add(parser, "--batch-size", type=int, help="Inputs run together.")
    return with_output_flags(parser, 'One JSON object per input on stdout: {"input", "label", "scores": {label: '
                                     'probability}} or {"input", "output"}.')


def parse(parser: argparse.ArgumentParser, flags: ConfigFlags, arguments: List[str], texts_field: str, what: str,
          check: Callable = lambda config: None):
    """(flags, config) with the texts from the arguments or stdin; TensorFlow loaded once the flags are checked (and
    `check(config)`: what needs no TensorFlow)."""
    args = parser.parse_args(arguments)
    texts = read_texts(getattr(args, texts_field), what)
    config = flags.build(args, base={texts_field: texts})
    check(config)
    import_tensorflow(args.verbose)
    quiet_libraries(args.verbose)
    return args, config


def run_fill_mask(parser: argparse.ArgumentParser, arguments: List[str]) -> None:
    args, config = parse(parser, FILL_MASK_FLAGS, arguments, "sentences",
                         "sentences with [MASK] where a word is missing")
    for sentence, predictions in zip(config.sentences, fill_mask.fill_mask(config, saved_model_loader(config.model, config.base_model, "mlm"))):
        if args.json:
            print(json.dumps({"sentence": sentence, "predictions": predictions}, ensure_ascii=False), flush=True)
        else:
            print(format_table(sentence, predictions), flush=True)


def run_text2text(parser: argparse.ArgumentParser, arguments: List[str]) -> None:
    args, config = parse(parser, TEXT2TEXT_FLAGS, arguments, "inputs",
                         "inputs (e.g. \"quality: How do I sort a list?\")")
    for result in prediction.predict_text2text(config, saved_model_loader(config.model, config.base_model, "t5")):
        if args.json:
            print(json.dumps(result, ensure_ascii=False), flush=True)
        elif "label" in result:
            scores, label = result["scores"], result["label"]
            others = ", ".join(f"{name} {score:.3f}" for name, score in scores.items() if name != label)
            print(f"input:  {result['input']}\nlabel:  {label} ({scores[label]:.3f}; {others})\n", flush=True)
        else:
            print(f"input:  {result['input']}\noutput: {result['output']}\n", flush=True)


def encoder_parser(prog: str, pipeline: str) -> argparse.ArgumentParser:
    words = "a tab between the two texts of a pair" if pipeline == "text-classification" else "words split at spaces"
    parser = texts_parser(f"{prog} {pipeline}", encoder_prediction.__doc__, "texts", "TEXT",
                          f"Input texts ({words}); none: read lines from stdin.", ENCODER_FLAGS,
                          f"A {pipeline.replace('-', ' ')} model: `python train.py --task "
                          f"{PIPELINES[pipeline]}`'s --output-dir, a save_pretrained folder or a "
                          "Hub name.")
    ENCODER_FLAGS.add(parser, "--max-length", type=int,
                      help="Tokens per input, at most as many as the model reads; longer inputs are cut (default: "
                           "the training length, else 512 or what the model reads if fewer).")
    ENCODER_FLAGS.add(parser, "--batch-size", type=int, help="Inputs run together.")
    shape = ('{"text", ["pair",] "label", "scores": {label: probability}} or {"text", "score"} (regression)'
             if pipeline == "text-classification" else
             '{"text", "words", "tags", "entities": [{"entity", "words", "start", "end"}]}')
    return with_output_flags(parser, f"One JSON object per input on stdout: {shape}.")


def format_encoder_result(result: dict) -> str:
    """One input's prediction, as the table shows it."""
    shown = result["text"] + (f"  |  {result['pair']}" if "pair" in result else "")
    if "words" in result:
        tags = " ".join(f"{word}/{tag or '-'}" for word, tag in zip(result["words"], result["tags"]))
        entities = ", ".join(f"{entity['entity']} '{entity['words']}'" for entity in result["entities"]) or "none"
        return f"input:    {shown}\ntags:     {tags}\nentities: {entities}\n"
    if "score" in result:
        return f"input:  {shown}\nscore:  {result['score']:.4f}\n"
    scores, label = result["scores"], result["label"]
    others = ", ".join(f"{name} {score:.3f}" for name, score in scores.items() if name != label)
    return f"input:  {shown}\nlabel:  {label} ({scores[label]:.3f}; {others})\n"


def run_encoder(pipeline: str, parser: argparse.ArgumentParser, arguments: List[str]) -> None:
    what = "texts to " + ("classify" if pipeline == "text-classification" else "tag")
    args, config = parse(parser, ENCODER_FLAGS, arguments, "texts", what, encoder_prediction.check_max_length)
    predict = encoder_prediction.classify_texts if pipeline == "text-classification" else encoder_prediction.tag_texts
    for result in predict(config, saved_model_loader(config.model, config.base_model, "encoder")):
        print(json.dumps(result, ensure_ascii=False) if args.json else format_encoder_result(result), flush=True)


def embedding_parser(prog: str, mode: str) -> argparse.ArgumentParser:
    search = mode == "search"
    parser = argparse.ArgumentParser(prog=f"{prog} {mode}", description=embedding_prediction.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("texts", nargs="*", metavar="QUERY" if search else "TEXT",
                        help=("Queries" if search else "Texts to embed") + "; none: read lines from stdin." +
                        (" None with --beir." if search else ""))
    EMBEDDING_FLAGS.add(parser, "--model", "--model-name-or-path", required=True,
                        help="An embedding model: `python train.py --task sentence-embedding`'s --output-dir, or a "
                             "sentence-transformers folder of an encoder mlm_tpu reads (its 1_Pooling says the "
                             "pooling).")
    EMBEDDING_FLAGS.add(parser, "--max-length", type=int,
                        help="Tokens per text; longer texts are cut (default: the folder's max_seq_length, else what "
                             "the model reads).")
    EMBEDDING_FLAGS.add(parser, "--batch-size", type=int, help="Texts run together (default: 32).")
    if search:
        EMBEDDING_FLAGS.add(parser, "--corpus", metavar="FILE",
                            help="The documents: one per line, or BEIR's corpus.jsonl (its _id, title and text).")
        EMBEDDING_FLAGS.add(parser, "--top-k", type=int, help="Documents shown per query (default: 10).")
        EMBEDDING_FLAGS.add(parser, "--beir", metavar="FOLDER",
                            help="A BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv): its queries ranked "
                                 "against its corpus (exact search) and scored by nDCG@10, recall@100 and MRR@10 "
                                 "(trec_eval's, through pytrec-eval-terrier).")
        EMBEDDING_FLAGS.add(parser, "--split", help="--beir: the split whose qrels score the run (default: test).")
        EMBEDDING_FLAGS.add(parser, "--run-file", metavar="FILE",
                            help="--beir: write the ranking (100 documents per query) here as a TREC run file.")
        shape = '{"query", "results": [{"id", "score", "text"}]}; with --beir one object of scores'
    else:
        EMBEDDING_FLAGS.add(parser, "--output", metavar="FILE.npy",
                            help="Write the vectors to this NumPy file, one row per text, in their order.")
        shape = '{"text", "embedding"}'
    return with_output_flags(parser, f"One JSON object per {'query' if search else 'text'} on stdout: {shape}.")


def run_embedding(mode: str, parser: argparse.ArgumentParser, arguments: List[str]) -> None:
    search = mode == "search"
    args = parser.parse_args(arguments)
    scored = search and "beir" in EMBEDDING_FLAGS.given(args)  # a BEIR folder's own queries: none read
    texts = [] if scored and not args.texts else read_texts(args.texts, "queries" if search else "texts to embed")
    config = EMBEDDING_FLAGS.build(args, base={"texts": tuple(texts)})
    embedding_prediction.check_embedding_config(config, search)
    data = embedding_prediction.read_beir_split(config) if scored else None  # checked before TensorFlow loads
    import_tensorflow(args.verbose)
    quiet_libraries(args.verbose)
    if data:
        print(json.dumps(embedding_prediction.score_beir(config, data)), flush=True)
    elif search:
        for result in embedding_prediction.search_corpus(config):
            print(json.dumps(result, ensure_ascii=False) if args.json else format_search_result(result), flush=True)
    else:
        vectors = embedding_prediction.embed_texts(config)
        for text, vector in zip(config.texts, vectors):
            if args.json:
                print(json.dumps({"text": text, "embedding": [float(value) for value in vector]},
                                 ensure_ascii=False), flush=True)
            elif not config.output:
                shown = ", ".join(f"{value:.4f}" for value in vector[:4])
                print(f"{text}\n  {len(vector)} dimensions: [{shown}, ...]", flush=True)
        if config.output:
            print(f"Wrote {len(vectors)} vectors of {vectors.shape[1]} dimensions to {config.output}", flush=True)


def format_search_result(result: dict) -> str:
    lines = [f"query: {result['query']}"]
    lines += [f"  {rank:>2}. {hit['score']:.4f}  [{hit['id']}] {hit['text'][:100]}"
              for rank, hit in enumerate(result["results"], start=1)]
    return "\n".join(lines) + "\n"


# The first argument may name a mode; each has its parser (its own --help) and its run.
MODES = {"fill-mask": (fill_mask_parser, run_fill_mask), "text2text": (text2text_parser, run_text2text),
         **{pipeline: (lambda prog, pipeline=pipeline: encoder_parser(prog, pipeline),
                       lambda parser, arguments, pipeline=pipeline: run_encoder(pipeline, parser, arguments))
            for pipeline in ("text-classification", "token-classification")},
         **{mode: (lambda prog, mode=mode: embedding_parser(prog, mode),
                   lambda parser, arguments, mode=mode: run_embedding(mode, parser, arguments))
            for mode in ("embed", "search")}}
DEFAULT_MODE = "fill-mask"


def build_parser(prog: str) -> argparse.ArgumentParser:
    """What `predict --help` shows: the default mode's flags (their epilog points to the other modes')."""
    return MODES[DEFAULT_MODE][0](prog)


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m mlm_tpu.predict") -> None:
    """Run the mode named by the first argument, or fill-mask when the first argument names none."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    mode = arguments.pop(0) if arguments and arguments[0] in MODES else DEFAULT_MODE
    parser, run = MODES[mode]
    run(parser(prog), arguments)
