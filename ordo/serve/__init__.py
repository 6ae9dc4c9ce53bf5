"""``ordo serve``: a translation server (FastAPI) with a web page that shows word order.

Nothing else in ordo imports this package; ``ordo/cli/serving.py`` imports it inside the ``serve`` verb, after
checking that the ``ordo[serve]`` extra is installed.
"""
