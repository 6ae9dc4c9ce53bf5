"""The benchmark scripts behind bench/RESULTS.md (each writes its report under bench/results/). Its modules
import each other by module path (``bench.machine``); a script runs from the repository root as
``python bench/NAME.py`` or ``python -m bench.NAME``."""
