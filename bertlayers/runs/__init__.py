"""Runs: the top tier, built from everything below it. A pretraining run (data → pretrainer →
`fit` under a strategy → saved encoder) and a fine-tuning run (encoder → task model → `fit`),
which the example scripts drive from their flags."""
