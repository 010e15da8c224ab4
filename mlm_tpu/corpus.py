"""Where text comes from: a 🤗 dataset, local files, or a built-in offline corpus.

Every command takes the same corpus flags (a `CorpusSource`) and reads text the same way:
as a stream, in batches, never holding the whole corpus in memory. Masked-LM commands read
documents (one text column, blank ones skipped); text-to-text sharding reads records (several
columns per row, each row kept, with where it came from for error messages). Bad input (a
missing file, a glob that matches nothing, an unknown column, a corpus with no text, a Hub
dataset while offline) raises `UserError` with one line that says what to do.
"""

import csv
import dataclasses
import glob
import itertools
import json
import os
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple, TypeVar

from mlm_tpu.configuration import check_ranges, setting
from mlm_tpu.errors import UserError, reason_of

DEFAULT_DATASET = "wikitext"
DEFAULT_DATASET_CONFIG = "wikitext-103-raw-v1"
SUPPORTED_SUFFIXES = (".txt", ".jsonl", ".json", ".csv", ".parquet")
# Longer documents are cut at whitespace into pieces of this many characters as they are read: far more
# than any model sees at once (~25,000 tokens), and what bounds the memory a one-line corpus takes.
MAX_DOCUMENT_CHARACTERS = 100_000
MAX_BATCH_CHARACTERS = 10 * MAX_DOCUMENT_CHARACTERS  # a batch of documents is tokenized at once: bound its text
GLOB_CHARACTERS = "*?["

Values = Tuple[Optional[str], ...]  # one row's values of the columns asked for, in that order


class Record(NamedTuple):
    """One row of a corpus with columns, and where it came from."""

    source: str  # a file path, or "dataset NAME"
    row: int  # 1-based, counting the rows the source holds
    values: Values

    @property
    def where(self) -> str:
        return f"{self.source} row {self.row}"


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
    """What the user asked to read; exactly one of `dataset`, `text_files` or `builtin_corpus` is used."""

    dataset: Optional[str] = None
    dataset_config: Optional[str] = None
    split: str = "train"
    text_files: Tuple[str, ...] = ()
    builtin_corpus: Optional[str] = None
    text_column: str = "text"
    limit: Optional[int] = setting(None, low=1)

    def describe(self) -> Dict[str, object]:
        """A JSON-ready record of the source, for files that say how something was made."""
        if self.builtin_corpus:
            kind = {"builtin_corpus": self.builtin_corpus, "split": self.split}
        elif self.text_files:
            kind = {"text_files": list(self.text_files), "text_column": self.text_column}
        else:
            kind = {"dataset": self.dataset, "dataset_config": self.dataset_config, "split": self.split,
                    "text_column": self.text_column}
        return {**kind, "limit": self.limit}


def datasets_of(corpus: Optional[dict]) -> List[str]:
    """The Hub datasets a recorded corpus (`CorpusSource.describe()`) came from (local files and the built-in
    corpus are none)."""
    return [corpus["dataset"]] if corpus and corpus.get("dataset") and not os.path.exists(corpus["dataset"]) else []


def describe_corpus(corpus: Optional[dict]) -> str:
    """A recorded corpus in words, for model and tokenizer cards."""
    if not corpus:
        return "not recorded"
    if corpus.get("builtin_corpus"):
        return f"mlm_tpu's built-in corpus '{corpus['builtin_corpus']}' (the Python standard library's help pages)"
    if corpus.get("text_files"):
        return f"local files ({', '.join(corpus['text_files'][:3])}{', ...' if len(corpus['text_files']) > 3 else ''})"
    config = f" ({corpus['dataset_config']})" if corpus.get("dataset_config") else ""
    return f"the 🤗 dataset {corpus['dataset']}{config}, split {corpus.get('split', 'train')}"


def checked_source(source: CorpusSource) -> CorpusSource:
    """The source with the flags checked against each other and the default dataset filled in."""
    chosen = [flag for flag, value in (("--dataset", source.dataset), ("--text-files", source.text_files),
                                       ("--builtin-corpus", source.builtin_corpus)) if value]
    if len(chosen) > 1:
        raise UserError(f"give only one corpus source, not {' and '.join(chosen)}")
    check_ranges(source)
    if source.dataset_config and not source.dataset:
        raise UserError("--dataset-config needs --dataset")
    if source.builtin_corpus and source.builtin_corpus not in BUILTIN_CORPORA:
        raise UserError(f"there is no built-in corpus '{source.builtin_corpus}'; use one of "
                        f"{', '.join(BUILTIN_CORPORA)}")
    if source.builtin_corpus and source.split not in BUILTIN_SPLITS:
        raise UserError(f"the built-in corpus has splits {', '.join(BUILTIN_SPLITS)}, not '{source.split}'; fix --split")
    if source.text_files or source.builtin_corpus:
        return source
    dataset = source.dataset or DEFAULT_DATASET
    config = source.dataset_config or (DEFAULT_DATASET_CONFIG if dataset == DEFAULT_DATASET else None)
    return dataclasses.replace(source, dataset=dataset, dataset_config=config)


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


def _missing_columns(where: str, columns: Sequence[str], available: Iterable[str]) -> Optional[UserError]:
    """The error for the first of `columns` not among `available`, naming the flag that picks it."""
    available = [str(name) for name in available]
    for column in columns:
        if column not in available:
            flags = "--text-column" if len(columns) == 1 else "--input-column/--target-column"
            return UserError(f"{where} has no column '{column}' (columns: {', '.join(sorted(available)) or 'none'}); "
                             f"pass {flags}")
    return None


def _pick_columns(record: object, columns: Sequence[str], where: str) -> Values:
    """One record's values in `columns`, or a clear error when the record lacks one."""
    if not isinstance(record, dict):
        raise UserError(f"{where} is not an object with {', '.join(repr(c) for c in columns)} field(s)")
    missing = _missing_columns(where, columns, record)
    if missing:
        raise missing
    return tuple(record[column] for column in columns)


def _as_text(value: object, column: str, where: str, integers: bool) -> Optional[str]:
    """A cell as text: text as is; whole numbers as their digits where `integers` (class ids as labels)."""
    if value is None or isinstance(value, str):
        return value
    if integers and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise UserError(f"{where}: column '{column}' holds {type(value).__name__} values, not text; pick a text column "
                    "(--text-column, or --input-column/--target-column)")


def _pieces(text: str, limit: int) -> Iterator[str]:
    """`text` cut after spaces into pieces of at most `limit` characters (a stretch without one: cut anywhere)."""
    while len(text) > limit:
        cut = text.rfind(" ", limit // 2, limit) + 1 or limit
        yield text[:cut]
        text = text[cut:]
    yield text


def _read_txt(path: str, columns: Sequence[str]) -> Iterator[Values]:
    """One row per line; a line longer than MAX_DOCUMENT_CHARACTERS is read, and given, in pieces."""
    if len(columns) > 1:
        raise UserError(f"{path}: a .txt file holds one text per line, not columns ({', '.join(columns)}); "
                        "give text-to-text examples as .jsonl, .json, .csv or .parquet files")
    with open(path, encoding="utf-8") as lines:
        carried = ""  # the start of a long line, not yet given
        while True:
            chunk = lines.readline(MAX_DOCUMENT_CHARACTERS)
            if not chunk:
                break
            *whole, carried = _pieces(carried + chunk, MAX_DOCUMENT_CHARACTERS)
            if chunk.endswith("\n"):
                whole, carried = [*whole, carried], ""
            yield from ((piece,) for piece in whole)
        if carried:
            yield (carried,)


def _read_json_lines(path: str, columns: Sequence[str]) -> Iterator[Values]:
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    raise UserError(f"{path} line {number} is not valid JSON: {error.msg}") from None
                yield _pick_columns(record, columns, f"{path} line {number}")


def _read_json(path: str, columns: Sequence[str]) -> Iterator[Values]:
    """A .json file is either JSON lines (streamed) or one array of objects (read whole)."""
    with open(path, encoding="utf-8") as stream:
        starts_with_array = stream.read(4096).lstrip().startswith("[")
    if not starts_with_array:
        yield from _read_json_lines(path, columns)
        return
    with open(path, encoding="utf-8") as stream:
        try:
            records = json.load(stream)
        except json.JSONDecodeError as error:
            raise UserError(f"{path} is not valid JSON (line {error.lineno}): {error.msg}") from None
    for index, record in enumerate(records):
        yield _pick_columns(record, columns, f"{path} item {index}")


def _read_csv(path: str, columns: Sequence[str]) -> Iterator[Values]:
    """A CSV file with a header row; Excel's byte-order mark is not part of the first column's name."""
    csv.field_size_limit(2**31 - 1)  # the default 128 KB limit refuses long documents
    with open(path, encoding="utf-8-sig", newline="") as stream:
        reader = csv.DictReader(stream)
        missing = reader.fieldnames is not None and _missing_columns(path, columns, reader.fieldnames)
        if missing:
            raise missing
        for row in reader:
            yield tuple(row[column] for column in columns)


def _read_parquet(path: str, columns: Sequence[str]) -> Iterator[Values]:
    import pyarrow.parquet as parquet

    try:
        table_file = parquet.ParquetFile(path)
    except Exception as error:  # pyarrow raises several types for a file that is not parquet
        raise UserError(f"{path} is not a readable parquet file: {reason_of(error)}") from None
    missing = _missing_columns(path, columns, table_file.schema_arrow.names)
    if missing:
        raise missing
    for batch in table_file.iter_batches(batch_size=1024, columns=list(dict.fromkeys(columns))):
        yield from zip(*(batch.column(column).to_pylist() for column in columns))


FILE_READERS: Dict[str, Callable[[str, Sequence[str]], Iterator[Values]]] = {
    ".txt": _read_txt, ".jsonl": _read_json_lines, ".json": _read_json, ".csv": _read_csv,
    ".parquet": _read_parquet,
}


def _read_files(files: List[str], columns: Sequence[str]) -> Iterator[Record]:
    for path in files:
        reader = FILE_READERS[os.path.splitext(path)[1]]
        try:
            for row, values in enumerate(reader(path, columns), start=1):
                yield Record(path, row, values)
        except UnicodeDecodeError as error:
            raise UserError(f"{path} is not UTF-8 text (bad byte at offset {error.start}); "
                            "convert it to UTF-8") from None
        except OSError as error:
            raise UserError(f"cannot read {path}: {error.strerror or error}") from None


def _read_dataset(source: CorpusSource, columns: Sequence[str]) -> Iterator[Record]:
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
    name = f"dataset {described}"
    yield Record(name, 1, _pick_columns(first, columns, name))
    for number, row in enumerate(rows, start=2):
        yield Record(name, number, tuple(row[column] for column in columns))


Item = TypeVar("Item")


def _batched(items: Iterator[Item], batch_size: int, skip: int,
             size: Callable[[Item], int] = lambda item: 0) -> Iterator[List[Item]]:
    """Items in lists of `batch_size`, or fewer once they hold MAX_BATCH_CHARACTERS by `size` (the last one
    shorter), after the first `skip` ones."""
    batch: List[Item] = []
    characters = 0
    for item in itertools.islice(items, skip, None):
        batch.append(item)
        characters += size(item)
        if len(batch) == batch_size or characters >= MAX_BATCH_CHARACTERS:
            yield batch
            batch, characters = [], 0
    if batch:
        yield batch


@dataclass
class Corpus:
    """A stream of non-empty documents from a `CorpusSource`, counting what it has read."""

    source: CorpusSource
    documents_read: int = 0
    characters_read: int = 0
    _files: List[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.source = checked_source(self.source)
        # Resolve files now so a bad path fails before any slow work starts.
        if self.source.text_files:
            self._files = resolve_text_files(self.source.text_files)

    def _records(self, columns: Sequence[str]) -> Iterator[Record]:
        if self.source.builtin_corpus:
            if len(columns) > 1:
                raise UserError(f"the built-in corpus is plain text, without the columns ({', '.join(columns)}) "
                                "text-to-text examples need; use --text-files or --dataset")
            return (Record(self.name(), row, (text,)) for row, text in
                    enumerate(_builtin_split(self.source.builtin_corpus, self.source.split), start=1))
        if self._files:
            return _read_files(self._files, columns)
        return _read_dataset(self.source, columns)

    def documents(self) -> Iterator[str]:
        """Each non-blank document once, stripped, up to `--limit`; fails if there is none at all."""
        self.documents_read = self.characters_read = 0
        column = self.source.text_column
        for record in self._records((column,)):
            text = _as_text(record.values[0], column, record.where, integers=False)
            for piece in _pieces(text.strip(), MAX_DOCUMENT_CHARACTERS) if text else ():
                if not piece.strip():
                    continue
                self.documents_read += 1
                self.characters_read += len(piece)
                yield piece
                if self.source.limit is not None and self.documents_read >= self.source.limit:
                    return
        if self.documents_read == 0:
            raise UserError(f"the corpus has no text: {self.name()} holds no non-blank document")

    def records(self, columns: Sequence[str]) -> Iterator[Record]:
        """Every row's values in `columns`, blank or not, up to `--limit`; fails if there is no row at all."""
        self.documents_read = self.characters_read = 0
        for record in itertools.islice(self._records(columns), self.source.limit):
            record = record._replace(values=tuple(_as_text(value, column, record.where, integers=True)
                                                  for value, column in zip(record.values, columns)))
            self.documents_read += 1
            self.characters_read += sum(len(value) for value in record.values if value)
            yield record
        if self.documents_read == 0:
            raise UserError(f"the corpus has no rows: {self.name()} is empty")

    def batches(self, batch_size: int, skip: int = 0) -> Iterator[List[str]]:
        """Documents in lists of `batch_size` (fewer when long), after the first `skip` ones.

        Skipped documents are read but not returned: a resumed job passes what it has done.
        """
        return _batched(self.documents(), batch_size, skip, size=len)

    def record_batches(self, columns: Sequence[str], batch_size: int, skip: int = 0) -> Iterator[List[Record]]:
        """`records(columns)` in lists of `batch_size`, after the first `skip` rows (as `batches`)."""
        return _batched(self.records(columns), batch_size, skip)

    def name(self) -> str:
        """A short human description, for progress lines and errors."""
        if self.source.builtin_corpus:
            return f"built-in corpus '{self.source.builtin_corpus}' [{self.source.split}]"
        if self._files:
            return f"{len(self._files)} file(s) ({self._files[0]}{', ...' if len(self._files) > 1 else ''})"
        config = f"/{self.source.dataset_config}" if self.source.dataset_config else ""
        return f"dataset {self.source.dataset}{config} [{self.source.split}]"
