"""The ELECTRA line (`--task electra`): a generator and a discriminator pretrained together by replaced-token
detection, saved as two 🤗 folders. task.py is its plug-in; model.py the two models as one; replacements.py the
draws and the sampling; validation.py its scores; folders.py the output folder; presets.py the paper's shapes."""
