"""The model factory: what makes pochta's spam model, never what runs it.

- :mod:`.corpus`: the public SpamAssassin corpus, downloaded and verified (benchmarks, training);
- :mod:`.legit`: legitimate commercial letters pochta generates as training ham;
- :mod:`.fitting`: fitting the CatBoost model (:class:`pochta.antispam.model.booster.Model`);
- :mod:`.training`: replaying letters in date order, training, validating, evaluating;
- :mod:`.sources`: an operator's letters (Maildir, mbox, directories), bounded;
- :mod:`.installation`: the letters an installation's users filed, by the stored verdict.

A second top-level package of the distribution rather than ``pochta.factory``: the rule "the
runtime imports none of it" is then a rule about a package name, checked by
``tests/unit/test_imports.py`` and visible in every import line; the factory imports the runtime
(the features, the scanner, the model's format), never the other way round. Only the CLI (an
edge) imports it, inside the commands that train.
"""
