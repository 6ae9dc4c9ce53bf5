"""The GPU measurements: ordo against MarianMTModel on one GPU (peers.py), and the check kit of a lent GPU
machine (stage.sh here, check.sh there) with its FLOP count, speed table, profile and checkpoint scores."""
