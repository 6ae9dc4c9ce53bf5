"""The experiment code: real-data recipes, the comparison suites (compare.py), the verdict runs (replicate.py,
verdicts.py) and the corpus fetcher (fetch.py). Its modules import each other by module path
(``recipes.compare``); a script runs from the repository root as ``python recipes/NAME.py`` or
``python -m recipes.NAME``."""
