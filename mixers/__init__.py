"""Mixers: mixture specs, filter expressions, span replacement, Dolma- and Dolmino-style mixing."""
