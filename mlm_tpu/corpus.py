"""Where text comes from: a 🤗 dataset, local files, or a built-in offline corpus.

Every command takes the same corpus flags (`add_corpus_arguments`) and reads text the same way:
as a stream of documents, in batches, never holding the whole corpus in memory. Bad input (a
missing file, a glob that matches nothing, an unknown column, a corpus with no text, a Hub
dataset while offline) raises `UserError` with one line that says what to do.
"""

import argparse
import csv
import glob
import itertools
import json
import os
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from mlm_tpu.cli import add_flag
from mlm_tpu.errors import UserError, reason_of

DEFAULT_DATASET = "wikitext"
DEFAULT_DATASET_CONFIG = "wikitext-103-raw-v1"
SUPPORTED_SUFFIXES = (".txt", ".jsonl", ".json", ".csv", ".parquet")
GLOB_CHARACTERS = "*?["


def _pydoc_topics() -> Iterator[str]:
    """The standard library's help topics (`pydoc_data`): 79 pages of real English prose, ~0.5 MB.

    Each paragraph becomes one document, its lines joined, headings' underlines dropped.
    """
    from pydoc_data.topics import topics

    for name in sorted(topics):
        for paragraph in topics[name].split("\n\n"):
            words = paragraph.split()
            if words and not set("".join(words)) <= set("*=-~^"):
                yield " ".join(words)


BUILTIN_CORPORA: Dict[str, Callable[[], Iterator[str]]] = {"pydoc-topics": _pydoc_topics}
# Built-in corpora are one stream; every 20th document goes to validation, the next to test.
BUILTIN_SPLITS = {"validation": lambda index: index % 20 == 0, "test": lambda index: index % 20 == 1,
                  "train": lambda index: index % 20 > 1}


def _builtin_split(name: str, split: str) -> Iterator[str]:
    chosen = BUILTIN_SPLITS[split]
    return (document for index, document in enumerate(BUILTIN_CORPORA[name]()) if chosen(index))


@dataclass(frozen=True)
class CorpusSource:
    """What the user asked to read; exactly one of `dataset`, `text_files` or `builtin` is used."""

    dataset: Optional[str] = None
    dataset_config: Optional[str] = None
    split: str = "train"
    text_files: Tuple[str, ...] = ()
    builtin: Optional[str] = None
    text_column: str = "text"
    limit: Optional[int] = None

    def describe(self) -> Dict[str, object]:
        """A JSON-ready record of the source, for files that say how something was made."""
        if self.builtin:
            kind = {"builtin_corpus": self.builtin, "split": self.split}
        elif self.text_files:
            kind = {"text_files": list(self.text_files), "text_column": self.text_column}
        else:
            kind = {"dataset": self.dataset, "dataset_config": self.dataset_config, "split": self.split,
                    "text_column": self.text_column}
        return {**kind, "limit": self.limit}


def add_corpus_arguments(parser: argparse.ArgumentParser) -> None:
    """The corpus flags every command shares."""
    group = parser.add_argument_group(
        "corpus", "Where the text comes from: a 🤗 dataset (the default, wikitext-103), local files, "
        "or a built-in offline corpus. Give at most one of --dataset, --text-files, --builtin-corpus.")
    add_flag(group, "--dataset", "--dataset-name", default=None,
             help=f"🤗 dataset name or local dataset folder, streamed (default: {DEFAULT_DATASET} "
                  "when no other source is given).")
    add_flag(group, "--dataset-config", default=None,
             help=f"Configuration of --dataset (default with wikitext: {DEFAULT_DATASET_CONFIG}).")
    add_flag(group, "--split", default="train",
             help="Split to read from --dataset or --builtin-corpus (train, validation, test; default: train); "
                  "commands that write data also name their output after it.")
    add_flag(group, "--text-files", nargs="+", default=None, metavar="PATH",
             help="Local files, folders or globs (quote them): .txt (one document per line, blank "
                  "lines skipped), .jsonl/.json, .csv and .parquet (text in --text-column).")
    add_flag(group, "--text-column", default="text",
             help="Column holding the text in .jsonl/.json/.csv/.parquet files and datasets (default: text).")
    add_flag(group, "--builtin-corpus", choices=sorted(BUILTIN_CORPORA), default=None,
             help="Offline corpus shipped with Python itself: 'pydoc-topics' is the standard "
                  "library's help pages (~0.5 MB of English prose, no download); its --split validation "
                  "and test are every 20th document (90%% stays in train).")
    add_flag(group, "--limit", type=int, default=None, metavar="N",
             help="Read at most N documents (default: all).")


def corpus_source_from_args(args: argparse.Namespace) -> CorpusSource:
    """Check the corpus flags against each other and turn them into a `CorpusSource`."""
    chosen = [flag for flag, value in (("--dataset", args.dataset), ("--text-files", args.text_files),
                                       ("--builtin-corpus", args.builtin_corpus)) if value]
    if len(chosen) > 1:
        raise UserError(f"give only one corpus source, not {' and '.join(chosen)}")
    if args.limit is not None and args.limit < 1:
        raise UserError(f"--limit must be at least 1 document, not {args.limit}")
    if args.dataset_config and not args.dataset:
        raise UserError("--dataset-config needs --dataset")
    if args.builtin_corpus and args.split not in BUILTIN_SPLITS:
        raise UserError(f"the built-in corpus has splits {', '.join(BUILTIN_SPLITS)}, not '{args.split}'; fix --split")
    if args.text_files or args.builtin_corpus:
        return CorpusSource(text_files=tuple(args.text_files or ()), builtin=args.builtin_corpus,
                            split=args.split, text_column=args.text_column, limit=args.limit)
    dataset = args.dataset or DEFAULT_DATASET
    config = args.dataset_config or (DEFAULT_DATASET_CONFIG if dataset == DEFAULT_DATASET else None)
    return CorpusSource(dataset=dataset, dataset_config=config, split=args.split,
                        text_column=args.text_column, limit=args.limit)


def resolve_text_files(patterns: Iterable[str]) -> List[str]:
    """Expand globs and folders into a sorted list of readable files, failing on the first bad one."""
    files: List[str] = []
    for pattern in patterns:
        if any(c in pattern for c in GLOB_CHARACTERS):
            matches = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
            if not matches:
                raise UserError(f"--text-files pattern '{pattern}' matches no file; check the path "
                                "and quote the pattern so the shell does not expand it")
            files.extend(matches)
        elif os.path.isdir(pattern):
            inside = sorted(os.path.join(root, name) for root, _, names in os.walk(pattern)
                            for name in names if name.endswith(SUPPORTED_SUFFIXES))
            if not inside:
                raise UserError(f"--text-files folder '{pattern}' holds no {'/'.join(SUPPORTED_SUFFIXES)} file")
            files.extend(inside)
        elif not os.path.exists(pattern):
            raise UserError(f"--text-files: file '{pattern}' does not exist")
        else:
            files.append(pattern)
    for path in files:
        if not path.endswith(SUPPORTED_SUFFIXES):
            raise UserError(f"--text-files: cannot read '{path}': use {', '.join(SUPPORTED_SUFFIXES)} files")
        if not os.access(path, os.R_OK):
            raise UserError(f"--text-files: file '{path}' is not readable (check its permissions)")
    return files


def _check_column(record: object, column: str, where: str) -> Optional[str]:
    """The text of one record's `column`, or a clear error when the record has no such column."""
    if not isinstance(record, dict):
        raise UserError(f"{where} is not an object with a '{column}' field")
    if column not in record:
        available = ", ".join(sorted(map(str, record))) or "none"
        raise UserError(f"{where} has no column '{column}' (columns: {available}); pass --text-column")
    value = record[column]
    if value is not None and not isinstance(value, str):
        raise UserError(f"{where}: column '{column}' holds {type(value).__name__}, not text")
    return value


def _read_txt(path: str, column: str) -> Iterator[Optional[str]]:
    with open(path, encoding="utf-8") as lines:
        yield from lines


def _read_json_lines(path: str, column: str) -> Iterator[Optional[str]]:
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    raise UserError(f"{path} line {number} is not valid JSON: {error.msg}") from None
                yield _check_column(record, column, f"{path} line {number}")


def _read_json(path: str, column: str) -> Iterator[Optional[str]]:
    """A .json file is either JSON lines (streamed) or one array of objects (read whole)."""
    with open(path, encoding="utf-8") as stream:
        starts_with_array = stream.read(4096).lstrip().startswith("[")
    if not starts_with_array:
        yield from _read_json_lines(path, column)
        return
    with open(path, encoding="utf-8") as stream:
        try:
            records = json.load(stream)
        except json.JSONDecodeError as error:
            raise UserError(f"{path} is not valid JSON (line {error.lineno}): {error.msg}") from None
    for index, record in enumerate(records):
        yield _check_column(record, column, f"{path} item {index}")


def _read_csv(path: str, column: str) -> Iterator[Optional[str]]:
    with open(path, encoding="utf-8", newline="") as stream:
        reader = csv.DictReader(stream)
        if reader.fieldnames is not None and column not in reader.fieldnames:
            raise UserError(f"{path} has no column '{column}' (columns: {', '.join(reader.fieldnames)}); "
                            "pass --text-column")
        for row in reader:
            yield row[column]


def _read_parquet(path: str, column: str) -> Iterator[Optional[str]]:
    import pyarrow.parquet as parquet

    try:
        table_file = parquet.ParquetFile(path)
    except Exception as error:  # pyarrow raises several types for a file that is not parquet
        raise UserError(f"{path} is not a readable parquet file: {reason_of(error)}") from None
    names = table_file.schema_arrow.names
    if column not in names:
        raise UserError(f"{path} has no column '{column}' (columns: {', '.join(names)}); pass --text-column")
    for batch in table_file.iter_batches(batch_size=1024, columns=[column]):
        yield from batch.column(0).to_pylist()


FILE_READERS: Dict[str, Callable[[str, str], Iterator[Optional[str]]]] = {
    ".txt": _read_txt, ".jsonl": _read_json_lines, ".json": _read_json, ".csv": _read_csv,
    ".parquet": _read_parquet,
}


def _read_files(files: List[str], column: str) -> Iterator[Optional[str]]:
    for path in files:
        reader = FILE_READERS[os.path.splitext(path)[1]]
        try:
            yield from reader(path, column)
        except UnicodeDecodeError as error:
            raise UserError(f"{path} is not UTF-8 text (bad byte at offset {error.start}); "
                            "convert it to UTF-8") from None
        except OSError as error:
            raise UserError(f"cannot read {path}: {error.strerror or error}") from None


def _read_dataset(source: CorpusSource) -> Iterator[Optional[str]]:
    """Stream a 🤗 dataset (Hub name or local dataset folder) row by row."""
    import datasets
    from huggingface_hub.utils import logging as hub_logging

    hub_logging.set_verbosity_error()  # its retry warnings would bury our one-line error
    described = source.dataset + (f" ({source.dataset_config})" if source.dataset_config else "")
    try:
        rows = iter(datasets.load_dataset(source.dataset, source.dataset_config, split=source.split,
                                          streaming=True))
        first = next(rows, None)
    except Exception as error:  # datasets raises many types: offline, not found, bad split or config
        raise UserError(f"cannot load dataset {described} split '{source.split}': {reason_of(error)}. Without "
                        "network, use --text-files or --builtin-corpus pydoc-topics") from None
    if first is None:
        return
    yield _check_column(first, source.text_column, f"dataset {described}")
    for row in rows:
        yield row[source.text_column]


@dataclass
class Corpus:
    """A stream of non-empty documents from a `CorpusSource`, counting what it has read."""

    source: CorpusSource
    documents_read: int = 0
    characters_read: int = 0
    _files: List[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Resolve files now so a bad path fails before any slow work starts.
        if self.source.text_files:
            self._files = resolve_text_files(self.source.text_files)

    def _raw_texts(self) -> Iterator[Optional[str]]:
        if self.source.builtin:
            return _builtin_split(self.source.builtin, self.source.split)
        if self._files:
            return _read_files(self._files, self.source.text_column)
        return _read_dataset(self.source)

    def documents(self) -> Iterator[str]:
        """Each non-blank document once, stripped, up to `--limit`; fails if there is none at all."""
        self.documents_read = self.characters_read = 0
        for text in self._raw_texts():
            text = text.strip() if text else ""
            if not text:
                continue
            self.documents_read += 1
            self.characters_read += len(text)
            yield text
            if self.source.limit is not None and self.documents_read >= self.source.limit:
                return
        if self.documents_read == 0:
            raise UserError(f"the corpus has no text: {self.name()} holds no non-blank document")

    def batches(self, batch_size: int, skip: int = 0) -> Iterator[List[str]]:
        """Documents in lists of `batch_size` (the last one shorter), after the first `skip` ones.

        Skipped documents are read but not returned: a resumed job passes what it has done.
        """
        batch: List[str] = []
        for document in itertools.islice(self.documents(), skip, None):
            batch.append(document)
            if len(batch) == batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    def name(self) -> str:
        """A short human description, for progress lines and errors."""
        if self.source.builtin:
            return f"built-in corpus '{self.source.builtin}' [{self.source.split}]"
        if self._files:
            return f"{len(self._files)} file(s) ({self._files[0]}{', ...' if len(self._files) > 1 else ''})"
        config = f"/{self.source.dataset_config}" if self.source.dataset_config else ""
        return f"dataset {self.source.dataset}{config} [{self.source.split}]"
