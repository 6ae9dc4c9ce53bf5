"""Training: optimiser and schedule, checkpoints, the training loop, distributed set-up."""
