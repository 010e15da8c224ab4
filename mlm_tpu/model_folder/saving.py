"""Writing a model folder: `save_pretrained` of model and tokenizer, and the records that go with them.

The folder is written through a staging folder (output_dir.py), so a kill mid-save leaves the
previous save intact, and other entries of the output folder (backup/, logs/) are kept.
"""

import os
from typing import Dict, Optional

from mlm_tpu.jsonfiles import write_json
from mlm_tpu.output_dir import staged_output_dir


def save_model_folder(folder: str, model, tokenizer, records: Optional[Dict[str, dict]] = None) -> None:
    """Save model and tokenizer into `folder`, with `records` (file name -> JSON payload) beside them."""
    with staged_output_dir(folder) as staging:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        for name, payload in (records or {}).items():
            write_json(os.path.join(staging, name), payload)
