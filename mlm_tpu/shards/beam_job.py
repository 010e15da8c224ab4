"""Running the sharding job as an Apache Beam pipeline (`shard --runner NAME [Beam pipeline options]`).

This side runs where the command is typed: it checks that Beam is installed and knows the runner
and every option (one line each, before anything is read or written), then does what the local
job does around the writing (claim.py's one job per split, writer.py's finished-split check,
--overwrite and progress file), runs beam_pipeline.py on the runner and waits for it, keeping
the claim fresh. A `UserError` raised on a worker (a bad row, an empty corpus) comes back as
its one line. Local runners' worker processes log every start-up step to the terminal: that goes
to a temporary file unless --verbose.
"""

import contextlib
import dataclasses
import difflib
import io
import logging
import os
import re
import signal
import sys
import tempfile
import threading
import time
from typing import Iterator, Optional

from mlm_tpu.console import log
from mlm_tpu.corpus import Corpus
from mlm_tpu.errors import UserError, reason_of
from mlm_tpu.claim import Claim
from mlm_tpu.shards.format import MANIFEST
from mlm_tpu.shards.kinds import ShardKind
from mlm_tpu.shards.packing import ExampleMaker
from mlm_tpu.shards.writer import ShardWriter

INSTALL = "pip install 'mlm_tpu[beam]'"
# runners whose workers run on this machine; any other's (Dataflow, Flink, Spark, ...) run elsewhere, or in containers
LOCAL_RUNNERS = ("FnApiRunner", "DirectRunner", "BundleBasedDirectRunner", "SwitchingDirectRunner", "PrismRunner",
                 "InteractiveRunner", "TestDirectRunner")
CLAIM_REFRESH_SECONDS = 60
WORKER_USER_ERROR = re.compile(r"mlm_tpu\.errors\.UserError: (.+?)(?: \[while running '[^']*'\])?$", re.MULTILINE)


def _runner_key(name: str) -> str:
    """A runner's name as Beam matches it: any case, with or without "Runner", or the class's dotted path."""
    key = name.rsplit(".", 1)[-1].lower()
    return key[:-len("runner")] if key.endswith("runner") else key


def is_local_runner(name: str) -> bool:
    return _runner_key(name) in {_runner_key(local) for local in LOCAL_RUNNERS}


def beam_options_in(arguments) -> list:
    """The names of the Apache Beam pipeline options among `arguments` (none when Beam is not installed)."""
    try:
        _beam()
    except UserError:
        return []
    from apache_beam.options.pipeline_options import PipelineOptions

    known = PipelineOptions([]).get_all_options()
    names = [argument[2:].split("=", 1)[0] for argument in arguments if argument.startswith("--")]
    return [name for name in names if name.replace("-", "_") in known]


def _beam():
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # Beam warns at import about Google Cloud libraries only Dataflow needs
    try:
        import apache_beam
    except ImportError:
        raise UserError(f"--runner needs Apache Beam, which is not installed: {INSTALL}") from None
    finally:
        root.setLevel(level)
    return apache_beam


class BeamJob:
    """A sharding job for `config.runner`, its options checked; `run` runs it."""

    def __init__(self, config, verbose: bool = False):
        beam = _beam()
        from apache_beam.options.pipeline_options import PipelineOptions, PortableOptions

        self.config, self.verbose = config, verbose
        self.local = is_local_runner(config.runner)
        if verbose:
            logging.basicConfig(level=logging.INFO)  # Beam's own progress lines, and its workers' on a local runner
        logging.getLogger("apache_beam").setLevel(logging.INFO if verbose else logging.ERROR if self.local
                                                  else logging.WARNING)
        self.options = PipelineOptions(["--runner", config.runner, *config.pipeline_options])
        unknown = sorted(set(self.options.get_all_options(retain_unknown_options=True))
                         - set(self.options.get_all_options()))
        if unknown:
            close = difflib.get_close_matches(unknown[0], self.options.get_all_options(), n=1)
            hint = f" (did you mean --{close[0]}?)" if close else ""
            raise UserError(f"Apache Beam has no pipeline option --{unknown[0]}{hint}; pass shard's own flags and "
                            "Beam's pipeline options (see https://beam.apache.org/documentation/runners/)")
        from apache_beam.runners.runner import create_runner

        with self._runner_errors():
            runner = create_runner(config.runner)  # an unknown runner first, before its workers' paths
        loopback = (self.options.view_as(PortableOptions).environment_type or "").upper() == "LOOPBACK"
        if not (self.local or loopback):
            self._refuse_local_paths()
        with self._runner_errors():
            beam.Pipeline(runner=runner, options=self.options)  # the runner checks its own options

    @contextlib.contextmanager
    def _runner_errors(self) -> Iterator[None]:
        """What making the runner and checking its options raise, as one line."""
        runner = self.config.runner
        try:
            yield
        except ValueError as error:
            known = re.search(r"Valid values are (.*?) or the fully", str(error))
            if known:
                raise UserError(f"--runner {runner} is not a runner Apache Beam knows; use one of {known.group(1)}"
                                " (FnApiRunner on this machine, DataflowRunner on Google Cloud)") from None
            problems = "; ".join(line.strip() for line in str(error).splitlines()[1:] if line.strip())
            raise UserError(f"--runner {runner}: {problems or reason_of(error)}") from None
        except ImportError as error:
            raise UserError(f"--runner {runner} needs more of Apache Beam than is installed "
                            f"({reason_of(error)}): {INSTALL}") from None
        except Exception as error:  # a remote runner's checks call its cloud (Dataflow: the temp_location bucket)
            raise UserError(f"--runner {runner}: its options could not be checked ({reason_of(error)}); "
                            "check the project, region, locations and credentials") from None

    def _refuse_local_paths(self) -> None:
        """The workers read the tokenizer and corpus, and write the shards; those of any runner but a local one (or
        one whose workers are this process: --environment_type LOOPBACK) run on other machines, or in containers,
        and see nothing of this disk."""
        config = self.config
        local = [(flag, path) for flag, path in [("--tokenizer", config.tokenizer), ("--output-dir", config.output_dir),
                                                 ("--dataset", config.corpus.dataset)]
                 + [("--text-files", path) for path in config.corpus.text_files]
                 if path and not path.startswith("gs://") and (flag == "--output-dir" or os.path.exists(path))]
        if local:
            flag, path = local[0]
            raise UserError(f"{flag} {path} is on this machine, where {config.runner}'s workers cannot read or write; "
                            f"copy it to Cloud Storage (`gcloud storage cp -r {path} gs://BUCKET/...`) and pass the "
                            "gs:// path (only a local runner, such as FnApiRunner, or --environment_type LOOPBACK runs "
                            "its workers here)")

    def run(self, kind: ShardKind, corpus: Corpus, maker: ExampleMaker, writer: ShardWriter, claim: Claim) -> dict:
        """Run the pipeline to its end; return the manifest it wrote."""
        beam = _beam()
        from mlm_tpu.shards.beam_pipeline import build_pipeline

        config = self.config
        parts = corpus.parts(config.text_part_bytes)
        writer.save_progress(None)  # a re-run after a failure starts again, with these settings only
        pipeline = beam.Pipeline(options=self.options)
        on_workers = dataclasses.replace(config, num_workers=config.num_workers or 1)  # runners run a process a core
        build_pipeline(pipeline, on_workers, kind, corpus, parts, writer.settings, type(maker),
                       maker.units_per_example)
        log(f"Sharding {corpus.name()} ({len(parts)} part{'s' * (len(parts) != 1)}) into "
            f"{kind.describe(config, maker)}, {config.shard_size} per shard, as an Apache Beam pipeline on "
            f"{config.runner} -> {writer.storage.location()}")
        started = time.perf_counter()
        with _claim_kept_fresh(claim), _worker_output_hidden(self.local and not self.verbose), \
                _BeamThreadsQuietOnCtrlC() as ctrl_c:
            result = None
            try:
                result = pipeline.run()
                if hasattr(result, "job_id") and not self.local:
                    log(f"Submitted {config.runner} job {result.job_id()} (its progress is in the runner's console); "
                        "waiting for it to finish. Ctrl-C cancels it.")
                result.wait_until_finish()
            except KeyboardInterrupt:
                if result is not None and not self.local:  # a remote job would go on writing an unclaimed split
                    log(f"Cancelling the {config.runner} job")
                    result.cancel()
                raise
            except Exception as error:
                if ctrl_c.received:  # the workers it killed failed the pipeline first
                    raise KeyboardInterrupt from None
                raise _worker_user_error(error) or error
            state = str(getattr(result, "state", "DONE"))
            if "DONE" not in state:
                raise UserError(f"the {config.runner} job ended {state}, not done; see its logs")
        manifest = writer.read_manifest()
        seconds = time.perf_counter() - started
        units = manifest.get("corpus_tokens", manifest["documents"])  # tokens, or text2text rows
        log(f"Wrote {manifest['records']:,} {kind.describe(config, maker)} in {len(manifest['shards'])} shards "
            f"from {manifest['documents']:,} {'rows' if maker.unit_name == 'rows' else 'documents'} in "
            f"{seconds:.1f} s ({units / max(seconds, 1e-9):,.0f} {maker.unit_name}/s, Beam's start-up included). "
            f"Manifest: {writer.storage.location(MANIFEST)}")
        return manifest


def _worker_user_error(error: Exception) -> Optional[UserError]:
    """The `UserError` a worker raised, from the runner's report of the failure (which quotes its traceback)."""
    messages = WORKER_USER_ERROR.findall(str(error))
    return UserError(messages[-1]) if messages else None


class _BeamThreadsQuietOnCtrlC:
    """Ctrl-C in a terminal signals the whole process group, a local runner's worker processes included: they die,
    and each of Beam's threads that talked to one raises, printing its traceback (two to four of them) around the
    one line the interruption is. While the pipeline runs, exceptions of threads running Beam's (or gRPC's) code are
    held: after SIGINT they are dropped, now and while the process ends; otherwise shown as Python shows them."""

    def __init__(self):
        self.received = False
        self._held: list = []

    def __enter__(self) -> "_BeamThreadsQuietOnCtrlC":
        self._previous_hook = threading.excepthook
        threading.excepthook = self._hook
        self._previous_handler = None
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self._previous_handler = signal.signal(signal.SIGINT, self._on_ctrl_c)
        return self

    def _on_ctrl_c(self, number, frame) -> None:
        self.received = True
        raise KeyboardInterrupt

    def _hook(self, args) -> None:
        if not _in_beam(args.exc_traceback):
            self._previous_hook(args)
        elif not self.received:
            self._held.append(args)

    def __exit__(self, kind, value, traceback) -> None:
        if self._previous_handler is not None:
            signal.signal(signal.SIGINT, self._previous_handler)
        self.received = self.received or kind is not None and issubclass(kind, KeyboardInterrupt)
        if not self.received:
            threading.excepthook = self._previous_hook
            for args in self._held:
                self._previous_hook(args)
        self._held = []


def _in_beam(traceback) -> bool:
    """Whether a traceback passes through Apache Beam's or gRPC's code."""
    while traceback is not None:
        parts = traceback.tb_frame.f_code.co_filename.split(os.sep)
        if "apache_beam" in parts or "grpc" in parts:
            return True
        traceback = traceback.tb_next
    return False


@contextlib.contextmanager
def _claim_kept_fresh(claim: Claim) -> Iterator[None]:
    """Refresh the split's claim while the pipeline runs, so that no other job takes it over as stale."""
    stop = threading.Event()

    def refresh() -> None:
        while not stop.wait(CLAIM_REFRESH_SECONDS):
            try:
                claim.refresh()
            except UserError as error:  # storage hiccup: the next refresh tries again
                log(f"could not refresh {claim.storage.location()}'s writer record: {error}")

    thread = threading.Thread(target=refresh, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextlib.contextmanager
def _worker_output_hidden(hide: bool) -> Iterator[None]:
    """Point file descriptor 2, which local worker processes inherit, at a temporary file; keep this process' own
    lines (sys.stderr) where they were."""
    if not hide:
        yield
        return
    sys.stderr.flush()
    try:
        ours_on_descriptor_2 = sys.stderr.fileno() == 2
    except (AttributeError, OSError, io.UnsupportedOperation):  # a notebook's stderr is not a file
        ours_on_descriptor_2 = False
    saved, original = os.dup(2), sys.stderr
    with tempfile.TemporaryFile() as sink:
        if ours_on_descriptor_2:
            sys.stderr = os.fdopen(os.dup(saved), "w", buffering=1, encoding=original.encoding,
                                   errors="backslashreplace")
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if ours_on_descriptor_2:
                sys.stderr.close()
                sys.stderr = original
