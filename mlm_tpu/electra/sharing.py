"""How the generator and the discriminator share their embeddings (`--embedding-sharing`), the one thing besides the
family that tells ELECTRA's recipe from DeBERTa-v3's (He, Gao, Chen, ICLR 2023, section 3 and figure 1):

- `shared` (ES, ELECTRA's): one embeddings layer both models read, the generator predicting through it; the
  discriminator's loss and the generator's both move it, the "tug-of-war" the DeBERTa-v3 paper measures.
- `none` (NES): each model its own embeddings.
- `gdes` (gradient-disentangled embedding sharing, DeBERTa-v3's): the discriminator reads E_G + E_Δ, the generator's
  token embeddings with their gradient stopped, plus a table of its own that starts at zero. The generator's masked-LM
  loss alone moves E_G, the discriminator's loss alone E_Δ. E_Δ lives in the discriminator's own token-embedding
  variable, so a backup holds it as it is; a saved discriminator holds E_G + E_Δ merged (`merged`), as the released
  checkpoints do, and a run continuing one takes E_Δ = its table - E_G (`start_from_tables`), which reads the same.
  Only the token tables are shared (the embeddings' LayerNorm is each model's own), as microsoft/DeBERTa's RTD task
  shares `word_embeddings`.
"""

import contextlib
from typing import Dict

import tensorflow as tf

DEFAULT_SHARING = {"electra": "shared", "deberta-v2": "gdes"}  # each paper's
SHARING_WORDS = {"gdes": "gradient-disentangled (the discriminator reads the generator's token embeddings, their "
                         "gradient stopped, plus its own difference E_delta)",
                 "shared": "shared (one embeddings layer both models read and train)",
                 "none": "not shared (each model its own)"}


def token_table(model) -> tf.Variable:
    """A model's token-embedding table (ELECTRA's and DeBERTa's embeddings layers call it `weight`)."""
    return model.get_input_embeddings().weight


def tie_embeddings(generator, discriminator) -> None:
    """`shared`: make the generator read (and predict through) the discriminator's embeddings layer: one set of
    variables, saved into both folders. Both must be built (a built main layer would build a shared layer again,
    making new variables)."""
    shared = discriminator.get_input_embeddings()
    getattr(generator, generator.base_model_prefix).embeddings = shared
    generator.get_lm_head().input_embeddings = shared


def start_from_scratch(sharing: str, generator, discriminator) -> None:
    """Both models new and built: tie them (`shared`), or E_Δ = 0 (`gdes`)."""
    if sharing == "shared":
        tie_embeddings(generator, discriminator)
    elif sharing == "gdes":
        table = token_table(discriminator)
        table.assign(tf.zeros_like(table))


def start_from_tables(sharing: str, generator, discriminator) -> None:
    """Both models loaded: the discriminator's embeddings kept (`shared`), or E_Δ = its table - E_G (`gdes`), so it
    reads what it was saved reading."""
    if sharing == "shared":
        tie_embeddings(generator, discriminator)
    elif sharing == "gdes":
        token_table(discriminator).assign(token_table(discriminator) - token_table(generator))


def discriminator_inputs(sharing: str, generator, discriminator, input_ids: tf.Tensor) -> Dict[str, tf.Tensor]:
    """What the discriminator is called with: its input ids, or under `gdes` its embeddings E_G + E_Δ of them (each
    table gathered, then added: the same floats as adding the tables first, without a vocabulary-sized sum)."""
    if sharing != "gdes":
        return {"input_ids": input_ids}
    embeddings = discriminator.get_input_embeddings()
    read = (tf.gather(tf.stop_gradient(token_table(generator)), input_ids)
            + tf.gather(token_table(discriminator), input_ids))
    return {"input_ids": None, "inputs_embeds": tf.cast(read, embeddings.compute_dtype)}


@contextlib.contextmanager
def merged(sharing: str, generator, discriminator):
    """Within it, the discriminator's token table is what it reads (E_G + E_Δ under `gdes`), for saving; E_Δ is put
    back after, exactly."""
    if sharing != "gdes":
        yield
        return
    table = token_table(discriminator)
    delta = tf.identity(table.read_value())
    table.assign(delta + token_table(generator))
    try:
        yield
    finally:
        table.assign(delta)
