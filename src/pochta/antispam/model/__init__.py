"""The CatBoost model (``booster``) that turns a letter's features into P(spam), and how the
shipped one is trained (``training``); the shipped files are in ``data/``."""
