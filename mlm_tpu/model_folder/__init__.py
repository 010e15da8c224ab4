"""The model folder, both sides of the contract: what a saved folder holds (saving.py) and reading one
back (loading.py: checks.py, configs.py, checkpoint.py)."""
