"""The rules file: named symbols that add points to a letter's Spam Score (``ruleset``),
their conditions in a small expression language (``expr``), and the shipped
``default_rules.toml``."""
