"""The embedded demo federation: a real trace replayed as if three orchestrators were running it.

Pure Python (no Django): the services layer loads and stores its state, so nothing lives in a
worker's memory between rounds.
"""
