"""The xdn benchmark suite (``make bench``): every figure a ratio against a same-run baseline."""
