"""T5 fine-tuning, the second head: text-to-text classification and generation on the trainer's machinery.

head.py plugs T5 into `python train.py --head t5`; classification.py and generation.py say what
validation runs on the device and how it is scored; evaluation.py runs it over the eval shards.
"""
