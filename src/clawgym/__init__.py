"""clawgym: synthesize, run, verify and train Claw-style personal agents.

The packages are layers, each importing only those below it (docs/development.md draws the map;
tests/test_layout.py holds it): core < httpguard < checks < workspace < sandbox < serve < llm < verify <
importers < rl < pool < gateway < agent < rollout < cluster < evaluation < train < hf < view < skills < synth
< cli. Synthesis is the leaf wing, imported by the CLI only; lower packages reach plug-ins above them through
registries (:mod:`clawgym.core.registry`)."""

__version__ = "0.1.0"
