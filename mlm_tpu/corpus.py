"""Where text comes from: a 🤗 dataset, local files, or a built-in offline corpus.

Every command takes the same corpus flags (a `CorpusSource`) and reads text the same way:
as a stream, in batches, never holding the whole corpus in memory. Masked-LM commands read
documents (one text column, blank ones skipped); text-to-text sharding reads records (several
columns per row, each row kept, with where it came from for error messages). Bad input (a
missing file, a glob that matches nothing, an unknown column, a corpus with no text, a Hub
dataset while offline) raises `UserError` with one line that says what to do.
"""

import contextlib
import copy
import csv
import dataclasses
import glob
import gzip
import io
import itertools
import json
import os
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple, TypeVar

from mlm_tpu import cloud_storage
from mlm_tpu.configuration import check_ranges, setting
from mlm_tpu.errors import UserError, reason_of

DEFAULT_DATASET = "wikitext"
DEFAULT_DATASET_CONFIG = "wikitext-103-raw-v1"
SUPPORTED_SUFFIXES = (".txt", ".jsonl", ".json", ".csv", ".parquet")
GZIP = ".gz"  # text files may be gzipped, as C4's are (name.json.gz): read through gzip, as a stream
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


def _resolve_gcs(pattern: str) -> List[str]:
    """A gs:// file, folder (every supported file under it) or glob, as the files it names."""
    if any(c in pattern for c in GLOB_CHARACTERS):
        matches = [url for url, _ in cloud_storage.list_objects(pattern)]
        if not matches:
            raise UserError(f"--text-files pattern '{pattern}' matches no object; check the gs:// path")
        return matches
    found = cloud_storage.list_objects(pattern)
    if any(url == pattern for url, _ in found):
        return [pattern]
    inside = [url for url, _ in found if url.startswith(pattern.rstrip("/") + "/") and _readable_kind(url)]
    if not inside:
        raise UserError(f"--text-files: '{pattern}' is no object, nor a folder holding {'/'.join(SUPPORTED_SUFFIXES)} "
                        "files")
    return inside


def resolve_text_files(patterns: Iterable[str]) -> List[str]:
    """Expand globs and folders (local or gs://) into a sorted list of readable files, failing on the first bad one."""
    files: List[str] = []
    for pattern in patterns:
        if cloud_storage.is_gcs(pattern):
            files.extend(_resolve_gcs(pattern))
        elif any(c in pattern for c in GLOB_CHARACTERS):
            matches = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
            if not matches:
                raise UserError(f"--text-files pattern '{pattern}' matches no file; check the path "
                                "and quote the pattern so the shell does not expand it")
            files.extend(matches)
        elif os.path.isdir(pattern):
            inside = sorted(os.path.join(root, name) for root, _, names in os.walk(pattern)
                            for name in names if _readable_kind(name))
            if not inside:
                raise UserError(f"--text-files folder '{pattern}' holds no {'/'.join(SUPPORTED_SUFFIXES)} file")
            files.extend(inside)
        elif not os.path.exists(pattern):
            raise UserError(f"--text-files: file '{pattern}' does not exist")
        else:
            files.append(pattern)
    for path in files:
        if not _readable_kind(path):
            raise UserError(f"--text-files: cannot read '{path}': use {', '.join(SUPPORTED_SUFFIXES)} files (all but "
                            f".parquet also gzipped, {GZIP})")
        if not cloud_storage.is_gcs(path) and not os.access(path, os.R_OK):
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


@dataclass(frozen=True)
class CorpusPart:
    """A part of a corpus that can be read on its own: a file, the lines starting in bytes [start, end) of a .txt
    file, or (no path) the whole stream of a 🤗 dataset or the built-in corpus. Read one after another, in the
    order `Corpus.parts` gives them, the parts give exactly the corpus' documents."""

    path: Optional[str] = None
    start: int = 0
    end: Optional[int] = None  # None: to the end of the file


class _ByteRange(io.RawIOBase):
    """Bytes [start, end) of a binary file, as a file of its own."""

    def __init__(self, stream, start: int, end: int):
        self.stream, self.left = stream, end - start
        stream.seek(start)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.stream.read(min(len(buffer), self.left))
        buffer[:len(data)] = data
        self.left -= len(data)
        return len(data)


def _kind(path: str) -> str:
    """Which reader reads `path`: its suffix, under a .gz one."""
    return os.path.splitext(path[:-len(GZIP)] if path.endswith(GZIP) else path)[1]


def _readable_kind(path: str) -> bool:
    return _kind(path) in SUPPORTED_SUFFIXES and not (path.endswith(GZIP) and _kind(path) == ".parquet")


def _open_binary(path: str):
    """A local or gs:// file's bytes, decompressed as they are read if it is gzipped."""
    raw = cloud_storage.open_object(path) if cloud_storage.is_gcs(path) else open(path, "rb")
    return gzip.GzipFile(fileobj=raw) if path.endswith(GZIP) else raw


def _file_size(path: str) -> int:
    return cloud_storage.list_objects(path)[0][1] if cloud_storage.is_gcs(path) else os.path.getsize(path)


def _line_starts(path: str, every: int) -> List[int]:
    """Where to cut a .txt file into parts of about `every` bytes: the first line start at or after each multiple."""
    size = _file_size(path)
    starts = [0]
    with _open_binary(path) as stream:
        for wanted in range(every, size, every):
            if wanted <= starts[-1]:
                continue
            stream.seek(wanted - 1)
            while True:  # the byte before a line start is "\n" (a "\r\n" ends with it too)
                block = stream.read(65536)
                newline = block.find(b"\n")
                if newline >= 0 or not block:
                    break
            if newline < 0:
                break
            starts.append(stream.tell() - len(block) + newline + 1)
    return [start for start in starts if start < size] + [size]


@contextlib.contextmanager
def _open_text(path: str, start: int = 0, end: Optional[int] = None, encoding: str = "utf-8",
               newline: Optional[str] = None) -> Iterator[io.TextIOBase]:
    """A local or gs:// file as text (universal newlines, as `open` reads it), or only its bytes [start, end)."""
    with _open_binary(path) as raw:
        binary = raw if end is None else io.BufferedReader(_ByteRange(raw, start, end))
        with io.TextIOWrapper(binary, encoding=encoding, newline=newline) as stream:
            yield stream


def _read_txt(path: str, columns: Sequence[str], part: Optional[CorpusPart] = None) -> Iterator[Values]:
    """One row per line; a line longer than MAX_DOCUMENT_CHARACTERS is read, and given, in pieces."""
    if len(columns) > 1:
        raise UserError(f"{path}: a .txt file holds one text per line, not columns ({', '.join(columns)}); "
                        "give text-to-text examples as .jsonl, .json, .csv or .parquet files")
    with _open_text(path, part.start, part.end) if part else _open_text(path) as lines:
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
    with _open_text(path) as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    raise UserError(f"{path} line {number} is not valid JSON: {error.msg}") from None
                yield _pick_columns(record, columns, f"{path} line {number}")


def _read_json(path: str, columns: Sequence[str]) -> Iterator[Values]:
    """A .json file is either JSON lines (streamed) or one array of objects (read whole)."""
    with _open_text(path) as stream:
        starts_with_array = stream.read(4096).lstrip().startswith("[")
    if not starts_with_array:
        yield from _read_json_lines(path, columns)
        return
    with _open_text(path) as stream:
        try:
            records = json.load(stream)
        except json.JSONDecodeError as error:
            raise UserError(f"{path} is not valid JSON (line {error.lineno}): {error.msg}") from None
    for index, record in enumerate(records):
        yield _pick_columns(record, columns, f"{path} item {index}")


def _read_csv(path: str, columns: Sequence[str]) -> Iterator[Values]:
    """A CSV file with a header row; Excel's byte-order mark is not part of the first column's name."""
    csv.field_size_limit(2**31 - 1)  # the default 128 KB limit refuses long documents
    with _open_text(path, encoding="utf-8-sig", newline="") as stream:
        reader = csv.DictReader(stream)
        missing = reader.fieldnames is not None and _missing_columns(path, columns, reader.fieldnames)
        if missing:
            raise missing
        for row in reader:
            yield tuple(row[column] for column in columns)


def _read_parquet(path: str, columns: Sequence[str]) -> Iterator[Values]:
    import pyarrow.parquet as parquet

    try:
        table_file = parquet.ParquetFile(_open_binary(path) if cloud_storage.is_gcs(path) else path)
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


def _read_files(files: List[str], columns: Sequence[str], part: Optional[CorpusPart] = None) -> Iterator[Record]:
    """The rows of `files`, or of the one file (or range of a .txt file) `part` names."""
    for path in [part.path] if part else files:
        reader = FILE_READERS[_kind(path)]
        rows = _read_txt(path, columns, part) if reader is _read_txt else reader(path, columns)
        try:
            for row, values in enumerate(rows, start=1):
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
    """A stream of non-empty documents from a `CorpusSource`, counting what it has read.

    `part(...)` gives a view of one `CorpusPart` of it (see `parts`), which reads only that part, up to a limit
    of its own, and is not refused for being empty: the parts of a corpus can be read in parallel.
    """

    source: CorpusSource
    documents_read: int = 0
    characters_read: int = 0
    _files: List[str] = field(default_factory=list)
    _part: Optional[CorpusPart] = None  # a view of one part: read only it, up to _part_limit
    _part_limit: Optional[int] = None

    def __post_init__(self) -> None:
        self.source = checked_source(self.source)
        # Resolve files now so a bad path fails before any slow work starts.
        if self.source.text_files:
            self._files = resolve_text_files(self.source.text_files)

    def parts(self, text_part_bytes: int) -> List[CorpusPart]:
        """The corpus as parts, in order: each file, .txt files larger than `text_part_bytes` cut at line starts into
        parts of about that size; a 🤗 dataset or the built-in corpus is one part."""
        if not self._files:
            return [CorpusPart()]
        parts = []
        for path in self._files:
            if path.endswith(".txt") and _file_size(path) > text_part_bytes:
                starts = _line_starts(path, text_part_bytes)
                parts.extend(CorpusPart(path, start, end) for start, end in zip(starts, starts[1:]))
            else:
                parts.append(CorpusPart(path))
        return parts

    def part(self, part: CorpusPart, limit: Optional[int] = None) -> "Corpus":
        """A view of the corpus that reads only `part`, at most `limit` documents (or rows) of it."""
        view = copy.copy(self)
        view._part, view._part_limit = part, limit
        return view

    @property
    def _limit(self) -> Optional[int]:
        return self._part_limit if self._part else self.source.limit

    def _records(self, columns: Sequence[str]) -> Iterator[Record]:
        if self.source.builtin_corpus:
            if len(columns) > 1:
                raise UserError(f"the built-in corpus is plain text, without the columns ({', '.join(columns)}) "
                                "text-to-text examples need; use --text-files or --dataset")
            return (Record(self.name(), row, (text,)) for row, text in
                    enumerate(_builtin_split(self.source.builtin_corpus, self.source.split), start=1))
        if self._files:
            return _read_files(self._files, columns, self._part)
        return _read_dataset(self.source, columns)

    def documents(self) -> Iterator[str]:
        """Each non-blank document once, stripped, up to `--limit`; fails if there is none at all."""
        self.documents_read = self.characters_read = 0
        if self._limit == 0:  # a part after the corpus' --limit
            return
        column = self.source.text_column
        for record in self._records((column,)):
            text = _as_text(record.values[0], column, record.where, integers=False)
            for piece in _pieces(text.strip(), MAX_DOCUMENT_CHARACTERS) if text else ():
                if not piece.strip():
                    continue
                self.documents_read += 1
                self.characters_read += len(piece)
                yield piece
                if self._limit is not None and self.documents_read >= self._limit:
                    return
        if self.documents_read == 0 and not self._part:
            raise self.empty_error()

    def records(self, columns: Sequence[str], as_text: bool = True) -> Iterator[Record]:
        """Every row's values in `columns`, blank or not, up to `--limit`; fails if there is no row at all.
        Values are text (whole numbers as their digits), or with `as_text=False` as the source holds them
        (numbers, lists of words or tags), for the callers that check them."""
        self.documents_read = self.characters_read = 0
        for record in itertools.islice(self._records(columns), self._limit):
            if as_text:
                record = record._replace(values=tuple(_as_text(value, column, record.where, integers=True)
                                                      for value, column in zip(record.values, columns)))
            self.documents_read += 1
            self.characters_read += sum(len(value) for value in record.values if isinstance(value, (str, list)))
            yield record
        if self.documents_read == 0 and not self._part:
            raise self.empty_error(rows=True)

    def empty_error(self, rows: bool = False) -> UserError:
        """What to say when the corpus gives no document (or, for `records`, no row) at all."""
        if rows:
            return UserError(f"the corpus has no rows: {self.name()} is empty")
        return UserError(f"the corpus has no text: {self.name()} holds no non-blank document")

    def batches(self, batch_size: int, skip: int = 0) -> Iterator[List[str]]:
        """Documents in lists of `batch_size` (fewer when long), after the first `skip` ones.

        Skipped documents are read but not returned: a resumed job passes what it has done.
        """
        return _batched(self.documents(), batch_size, skip, size=len)

    def record_batches(self, columns: Sequence[str], batch_size: int, skip: int = 0,
                       as_text: bool = True) -> Iterator[List[Record]]:
        """`records(columns, as_text)` in lists of `batch_size`, after the first `skip` rows (as `batches`)."""
        return _batched(self.records(columns, as_text), batch_size, skip)

    def name(self) -> str:
        """A short human description, for progress lines and errors."""
        if self.source.builtin_corpus:
            return f"built-in corpus '{self.source.builtin_corpus}' [{self.source.split}]"
        if self._files:
            return f"{len(self._files)} file(s) ({self._files[0]}{', ...' if len(self._files) > 1 else ''})"
        config = f"/{self.source.dataset_config}" if self.source.dataset_config else ""
        return f"dataset {self.source.dataset}{config} [{self.source.split}]"
