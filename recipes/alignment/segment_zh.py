"""Word-segment Chinese lines from stdin with jieba (precise mode) for recipes/alignment/run.sh."""

import sys

import jieba

jieba.setLogLevel(60)
for line in sys.stdin:
    sys.stdout.write(" ".join(w for w in jieba.cut(line.strip()) if w.strip()) + "\n")
