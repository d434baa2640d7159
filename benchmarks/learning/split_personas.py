#!/usr/bin/env python3
"""`split_personas.py PERSONAS.yaml OUT_DIR`: two persona files with disjoint personas (train / held-out)."""

import sys

from clawgym.synth.personas import split_personas

if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b, na, nb = split_personas(sys.argv[1], sys.argv[2])
    print(f"{na} personas -> {a}; {nb} other personas -> {b}")
