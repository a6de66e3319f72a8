"""Taggers: the tagger interface, its name registry and the built-in taggers."""
