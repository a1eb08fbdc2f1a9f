"""From measurements to BENCHMARKS.md: the row model, the tables, and the prose.

``table`` is what figures fill (rows, notes, facts); ``markdown`` renders the
sections in report order; ``analysis`` turns the facts into the closing
"why, and what would reach it" lines, one function per figure.
"""
