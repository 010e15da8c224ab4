"""The downstream benchmark (`mlm-tpu downstream`), above training beside the API: it drives fine-tuning runs, one
per task, seed and model, under one fixed protocol, and reports medians and spreads. tasks.py (which tasks, where
their rows come from), movie_reviews.py (the offline tasks), benchmark.py (the runs), report.py (medians, spreads,
the table), floor.py (the TF-IDF floor)."""
