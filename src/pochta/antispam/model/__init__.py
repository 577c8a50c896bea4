"""The CatBoost model (``booster``) that turns a letter's features into P(spam), its columns
(``design``), its trees (``trees``) and explanations (``explain``); the shipped files are in
``data/``. Training it is the model factory's (:mod:`pochta_factory`)."""
